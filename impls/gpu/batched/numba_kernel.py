"""Document 003's design in Numba CUDA, as its Numba section writes it: one block per row,
one thread per seed, the row and the labels in shared memory, two passes per iteration
(labels, then centroids from the labels). Numba needs every shared and local array's size
at compile time, so `build(k, d, points, seeds)` compiles a kernel for that shape (closure
constants are compile-time constants to Numba). All arithmetic is float32: literals are
wrapped in float32() so that Numba does not promote to float64."""

from __future__ import annotations

import math


def build(k: int, d: int, points: int, seeds: int):
    from numba import cuda, float32, int32, uint8

    KD = k * d
    ROW = points * d
    LABELS = seeds * points
    FINALS = seeds * KD
    INF = float32(math.inf)
    ZERO = float32(0.0)

    @cuda.jit(fastmath=False)
    def batched_block_per_row(data, starts, max_iter, epsilon, best_centroids, best_inertia, best_seed, iterations):
        row = cuda.shared.array(ROW, float32)
        inertia = cuda.shared.array(seeds, float32)
        finals = cuda.shared.array(FINALS, float32)
        labels = cuda.shared.array(LABELS, uint8)
        r = cuda.blockIdx.x
        s = cuda.threadIdx.x
        for i in range(s, ROW, cuda.blockDim.x):
            row[i] = data[r, i // d, i % d]
        cuda.syncthreads()

        c = cuda.local.array(KD, float32)
        for i in range(KD):
            c[i] = starts[r, s, i // d, i % d]
        limit = float32(-1.0)
        if epsilon >= 0 and k > 1:
            yard = INF
            for a in range(k):
                for b in range(a + 1, k):
                    gap = ZERO
                    for j in range(d):
                        t = c[a * d + j] - c[b * d + j]
                        gap += t * t
                    yard = min(yard, math.sqrt(gap))
            limit = float32(epsilon) * yard
        sums = cuda.local.array(KD, float32)
        counts = cuda.local.array(k, int32)
        done = 0
        while done < max_iter:
            for p in range(points):
                best = INF
                label = 0
                for cl in range(k):
                    distance = ZERO
                    for j in range(d):
                        t = row[p * d + j] - c[cl * d + j]
                        distance += t * t
                    if distance < best:
                        best = distance
                        label = cl
                labels[s * points + p] = label
            for i in range(KD):
                sums[i] = ZERO
            for cl in range(k):
                counts[cl] = 0
            for p in range(points):
                label = labels[s * points + p]
                counts[label] += 1
                for j in range(d):
                    sums[label * d + j] += row[p * d + j]
            moved = ZERO
            for cl in range(k):
                if counts[cl] > 0:
                    shift = ZERO
                    for j in range(d):
                        nxt = sums[cl * d + j] / float32(counts[cl])
                        t = nxt - c[cl * d + j]
                        shift += t * t
                        c[cl * d + j] = nxt
                    moved = max(moved, math.sqrt(shift))
            done += 1
            if moved <= limit:
                break

        total = ZERO
        for p in range(points):
            best = INF
            for cl in range(k):
                distance = ZERO
                for j in range(d):
                    t = row[p * d + j] - c[cl * d + j]
                    distance += t * t
                best = min(best, distance)
            total += best
        inertia[s] = total
        for i in range(KD):
            finals[s * KD + i] = c[i]
        iterations[r, s] = done
        cuda.syncthreads()
        if s == 0:
            winner = 0
            for t in range(1, seeds):
                if inertia[t] < inertia[winner]:
                    winner = t
            best_inertia[r] = inertia[winner]
            best_seed[r] = winner
            for i in range(KD):
                best_centroids[r, i // d, i % d] = finals[winner * KD + i]

    return batched_block_per_row
