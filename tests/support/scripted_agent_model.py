"""Re-export of the STAND-IN chat model, which now lives in the package (the demo uses it).

See `memorystore.scripted_model`: a real `ChatModelBase` that plays back a script, for the
model providers we cannot reach here.
"""

from memorystore.scripted_model import (
    ModelCall,
    Reply,
    ScriptedAgentModel,
    ToolCall,
    Turn,
    text_of,
)

__all__ = ["ModelCall", "Reply", "ScriptedAgentModel", "ToolCall", "Turn", "text_of"]
