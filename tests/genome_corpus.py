"""The frozen genome corpus of ``tests/fixtures/genomes/`` (see its README): inputs of the kernel,
counted-evaluation and speed tests that do not change when runs are added under ``runs/``."""

from __future__ import annotations

from pathlib import Path

CORPUS = Path(__file__).resolve().parent / "fixtures" / "genomes"


def _lines(name: str) -> list[str]:
    return [line for line in (CORPUS / name).read_text().splitlines() if line]


def best_genomes() -> list[str]:
    """The distinct best-proxy genomes of the committed runs, sorted (131 of them)."""
    return _lines("best.txt")


def hall_of_fame_genomes() -> list[str]:
    """The best-proxy genomes and every other hall-of-fame genome of the committed runs, sorted."""
    return sorted({*best_genomes(), *_lines("hall_of_fame.txt")})
