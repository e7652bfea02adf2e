"""Writes the seed corpus of fuzz_receive.c (seeds/): a few scripts that reach deep into a call.

    python hostlib/csrc/fuzz/make_seeds.py

Input layout (fuzz_receive.c): world, rank, pool, K index; a call (shape, size, value seed);
then events, each an op byte (low 3 bits: 0 raw datagram, 1 answer a sent packet, 2/3 poll,
4 next call, 5 fail, 6 replay, 7 answer every outstanding DATA; high 4 bits: time passing).
"""

from __future__ import annotations

from pathlib import Path

SEEDS = Path(__file__).resolve().parent / "seeds"
FLOAT32, FLOAT16_AVG, INT32, REFUSED = 0b00000001, 0b00010101, 0b00000000, 0b00000011
ROUND, POLL_LATER, NEXT_CALL, FAIL = 0x07, 0xB2, 0x04, 0x05


def job(world: int, rank: int, pool: int, k_index: int) -> bytes:
    return bytes([world - 1, rank, pool - 2, k_index])


def call(shape: int, size_byte: int, seed: int) -> bytes:
    return bytes([shape, size_byte, seed])


def answer(pick: int, how: int, *extra: int) -> bytes:
    return bytes([0x31, pick, how, *extra])


def main() -> None:
    SEEDS.mkdir(exist_ok=True)
    seeds = {
        "clean-float32": job(1, 0, 8, 1) + call(FLOAT32, 10, 5) + bytes([ROUND]) * 40,
        "clean-int32-then-float16": job(4, 2, 16, 0)
        + call(INT32, 20, 1)
        + bytes([ROUND]) * 30
        + bytes([NEXT_CALL])
        + call(FLOAT16_AVG, 12, 9)
        + bytes([0x20, 0, 0, 0x40])
        + bytes([ROUND]) * 30,
        "loss-and-notices": job(3, 1, 4, 1)
        + call(FLOAT32, 4, 2)
        + bytes([POLL_LATER])
        + answer(0, 0x02)
        + answer(1, 0x12, 0, 0, 0, 1)
        + bytes([ROUND]) * 4
        + answer(0, 0x03)
        + answer(2, 0x04, 0, 3, 0, 0)
        + bytes([POLL_LATER, ROUND, ROUND]),
        "results-with-exponents": job(2, 0, 4, 3)
        + call(FLOAT32, 6, 7)
        + b"".join(answer(i % 3, 0x20 | 0x80, 255 - i, 1, 2, 3, 4) for i in range(12))
        + bytes([ROUND]) * 8,
        "raw-and-replays": job(2, 1, 8, 1)
        + call(INT32, 3, 3)
        + bytes([0x08, 24])
        + bytes(range(24))
        + bytes([0x06, 0x06, ROUND, FAIL, ROUND, NEXT_CALL])
        + call(REFUSED, 0, 0)
        + bytes([0] * 4),
    }
    for name, data in seeds.items():
        (SEEDS / name).write_bytes(data)


if __name__ == "__main__":
    main()
