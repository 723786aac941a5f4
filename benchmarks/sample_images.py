"""Write a folder of real-image crops for ``--input images:DIR``, from photographs Python packages ship.

Issue 13's "real images where a package ships some": no dataset can be downloaded here, so
the batch is cut from the photographs that installed packages carry in their wheels:

* matplotlib (an autoprox dependency): ``mpl-data/sample_data/grace_hopper.jpg`` (512x600);
* scikit-learn (optional; ``pip install scikit-learn``): ``datasets/images/china.jpg`` and
  ``flower.jpg`` (640x427 each).

Each crop is a seeded random square of 40% to 100% of the photo's shorter side, at a seeded
random place, resized to 224x224 and written as PNG (lossless, so the folder's digest, and so
the statistics cache key, depends only on the photos and the seed). Three photos make a
narrow sample of natural images: what the lever measures is natural-image statistics
against Gaussian noise, not a dataset's.

Usage: python benchmarks/sample_images.py --out /tmp/autoprox-images [--crops 64] [--seed 0]
Then:  autoprox cache build --space autoformer --input images:/tmp/autoprox-images ...
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.resources
import random
import sys
from pathlib import Path

SIZE = 224


def shipped_photos() -> list[tuple[str, Path]]:
    """(package, path) of each photograph found in the installed packages, in a fixed order."""
    found = []
    import matplotlib

    grace = Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg"
    if grace.is_file():
        found.append(("matplotlib", grace))
    try:
        images = importlib.resources.files("sklearn.datasets").joinpath("images")
        for name in ("china.jpg", "flower.jpg"):
            path = Path(str(images.joinpath(name)))
            if path.is_file():
                found.append(("scikit-learn", path))
    except ModuleNotFoundError:
        pass
    return found


def write_crops(out: Path, crops: int, seed: int) -> list[Path]:
    """``crops`` seeded crops of the shipped photographs into ``out`` (which must not hold images yet)."""
    from PIL import Image

    photos = shipped_photos()
    if not photos:
        raise SystemExit("sample_images: no shipped photograph found (matplotlib's sample data is missing)")
    out.mkdir(parents=True, exist_ok=True)
    if any(out.glob("*.png")):
        raise SystemExit(f"sample_images: {out} already holds PNG files; give an empty or new folder")
    rng = random.Random(seed)
    written = []
    for index in range(crops):
        package, path = photos[index % len(photos)]
        with Image.open(path) as photo:
            rgb = photo.convert("RGB")
            side = int(min(rgb.size) * rng.uniform(0.4, 1.0))
            left = rng.randrange(rgb.size[0] - side + 1)
            top = rng.randrange(rgb.size[1] - side + 1)
            crop = rgb.crop((left, top, left + side, top + side)).resize((SIZE, SIZE), Image.BILINEAR)
        target = out / f"crop{index:03d}-{path.stem}.png"
        partial = target.with_suffix(".part")
        crop.save(partial, format="PNG")
        partial.replace(target)
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder to write the crops into (new or empty)")
    parser.add_argument("--crops", type=int, default=64, help="how many crops (default 64)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the crops' sizes and places (default 0)")
    args = parser.parse_args(argv)
    written = write_crops(args.out, args.crops, args.seed)
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in written)).hexdigest()[:16]
    sources = ", ".join(f"{package}: {path.name}" for package, path in shipped_photos())
    print(f"wrote {len(written)} crops of {SIZE}x{SIZE} from {sources} into {args.out} (sha256 {digest}...)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
