"""Multi-index hashing over 64-bit perceptual hashes: near neighbours without all pairs.

The 64 bits are cut into ``chunks`` parts; each part has a sorted table of the entries'
values. A query looks up, in each table, its own part and every value within ``flips``
bits of it, and an entry found so is kept when the whole hashes differ in at most
``radius`` bits. By the pigeonhole principle every entry within
``chunks * (flips + 1) - 1`` bits of a query is found (4 chunks, 1 flip: 7 bits);
entries further apart are found when one part happens to be that close, which for a
near-duplicate clip, with its dozens of aligned frames, is likely for some frame (the
duplicates stage then aligns the whole clips). The work grows with the entries that
share a probed part value with a query (about ``N * probes / 2^(64/chunks)`` per query
for N entries), not with all pairs.
"""

from __future__ import annotations

import itertools

import numpy as np

QUERY_BATCH = 20_000  # queries per pass: bounds the memory of the candidate arrays


def popcount(x: np.ndarray) -> np.ndarray:
    """Set bits per 64-bit integer."""
    return np.bitwise_count(x.view(np.uint64)).astype(np.int16)


def flip_masks(bits: int, flips: int) -> np.ndarray:
    """Every value of ``bits`` bits with at most ``flips`` bits set (0 first)."""
    masks = [0]
    for n in range(1, flips + 1):
        masks += [sum(1 << b for b in combo) for combo in itertools.combinations(range(bits), n)]
    return np.array(masks, dtype=np.uint64)


class HashIndex:
    """Entries (64-bit hashes given as int64) searched for the ones near a set of queries."""

    def __init__(self, hashes: np.ndarray, chunks: int = 4, flips: int = 1) -> None:
        if not 3 <= chunks <= 8:
            raise ValueError(f"chunks must be 3 to 8, got {chunks}")
        if not 0 <= flips <= 2:
            raise ValueError(f"flips must be 0, 1 or 2, got {flips}")
        self.hashes = np.ascontiguousarray(hashes, dtype=np.int64).view(np.uint64)
        self.flips = flips
        edges = np.linspace(0, 64, chunks + 1).round().astype(int)
        self.parts = list(zip(edges[:-1], edges[1:]))
        self.masks = [flip_masks(hi - lo, flips) for lo, hi in self.parts]
        # per part: the entries ordered by the part's value, and where each value starts
        # in that order (a table of 2^bits + 1 offsets: a lookup is one array read)
        self._order, self._starts = [], []
        for k, (lo, hi) in enumerate(self.parts):
            if hi - lo > 24:
                raise ValueError(f"a part of {hi - lo} bits is too long for the lookup table: use more chunks")
            key = self._part(self.hashes, k).astype(np.int64)
            self._order.append(np.argsort(key, kind="stable"))
            counts = np.bincount(key, minlength=1 << (hi - lo))
            self._starts.append(np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))

    def _part(self, h: np.ndarray, k: int) -> np.ndarray:
        lo, hi = self.parts[k]
        return (h >> np.uint64(lo)) & np.uint64((1 << (hi - lo)) - 1)

    def __len__(self) -> int:
        return len(self.hashes)

    def guaranteed_radius(self) -> int:
        """Every entry within this many bits of a query is found."""
        return len(self.parts) * (self.flips + 1) - 1

    def search(self, queries: np.ndarray, radius: int, query_groups: np.ndarray | None = None,
               entry_groups: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(query position, entry position, Hamming distance) of the pairs within
        ``radius`` bits that share a probed part; a pair may come more than once. With
        groups (one integer per query and per entry), pairs of the same group are left
        out as they are found (a clip's own frames, say), so they take no memory."""
        q_all = np.ascontiguousarray(queries, dtype=np.int64).view(np.uint64)
        out_q, out_e, out_d = [], [], []
        for lo_q in range(0, len(q_all), QUERY_BATCH):
            q = q_all[lo_q : lo_q + QUERY_BATCH]
            for k in range(len(self.parts)):
                needles = (self._part(q, k)[:, None] ^ self.masks[k][None, :]).ravel().astype(np.int64)
                owner = np.repeat(np.arange(len(q)), len(self.masks[k]))
                lo = self._starts[k][needles]
                n = self._starts[k][needles + 1] - lo
                hit = n > 0
                lo, n, owner = lo[hit], n[hit], owner[hit]
                total = int(n.sum())
                if not total:
                    continue
                qi = np.repeat(owner, n)
                ei = self._order[k][np.repeat(lo - np.cumsum(n) + n, n) + np.arange(total)]
                d = popcount(q[qi] ^ self.hashes[ei])
                near = d <= radius
                if query_groups is not None:
                    near &= query_groups[lo_q + qi] != entry_groups[ei]
                out_q.append(qi[near] + lo_q)
                out_e.append(ei[near])
                out_d.append(d[near])
        if not out_q:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, np.zeros(0, dtype=np.int16)
        return np.concatenate(out_q), np.concatenate(out_e), np.concatenate(out_d)
