// What kmbench-gpu's two Hopper passes share (hopper_pass.cu, rows in registers, d <= 128;
// hopper_wide.cu, rows from shared memory, d > 128): the offset scores and their packing, the
// PTX of mbarriers, bulk copies and shared-memory descriptors, and the epilogue that folds a
// tile's scores into 32 slots and settles each row from them. hopper_pass.cu's header comment
// says why each piece is as it is.
#pragma once

constexpr int SLOTS = 32;                      // the packed epilogue's column slots
constexpr unsigned CORE_BYTES = 128;           // one core matrix: 8 rows x 16 bytes
constexpr unsigned FULL = 0xffffffffu;
constexpr unsigned NONE = 0xffffffffu;         // a packed score above every real one: no score yet
constexpr unsigned EXPONENT = 0xff800000u;     // sign and exponent: the same for every offset score
constexpr unsigned MANTISSA = 0x007fffffu;

// The bits of M = 1.5 x 2^E, the offset of every score (above): E - 2 is past the exponent of
// reach = |x|max C + H, with 1/16 to spare for the float evaluation and for the TF32 operands'
// norms (2^-10 above the float32 ones). bound_max = {C, H} from the update, norm_max = |x|max.
// Packable data (bound.packable) have exponent <= 250. Larger (streamed chunks are not checked for
// packing) would take M past the largest float: the exponent is capped at 251, and settle counts
// such rows as uncertain with an unbounded error (every row then goes to the full re-check).
constexpr unsigned UNBOUNDED_OFFSET = 254;  // M's exponent field at the cap
__device__ __forceinline__ unsigned score_offset(const float* bound_max, const float* norm_max) {
    const float reach = (norm_max[0] * bound_max[0] + bound_max[1]) * 1.0625f;
    const unsigned exponent = min(__float_as_uint(reach) >> 23, UNBOUNDED_OFFSET - 3);  // reach < 2^(exponent - 126)
    return (exponent + 3) << 23 | 1u << 22;
}

// A tile column's h + M: its centroid's half norm offset by M, or past k (a zero centroid) the
// binade's largest float, above every real score (the Triton pass's PACKED_ABSENT).
__device__ __forceinline__ float offset_half_norm(const float* half_norms, int column, int k, unsigned offset) {
    return column < k ? __fadd_rn(half_norms[column], __uint_as_float(offset)) : __uint_as_float(offset | MANTISSA);
}

// Centroid tiles of TILE_N_ in a pass's layout, once per iteration, each followed by its h + M
// (offset_half_norm): where(at, centroid, coordinate) says which centroid of the tile and which of
// its coordinates element `at` holds. Centroids past k are zeros.
template <int TILE_N_, int DIM_, typename Where>
__device__ __forceinline__ void lay_out_centroid_tiles(const float* __restrict__ c_tf32,
                                                       const float* __restrict__ half_norms,
                                                       const float* __restrict__ bound_max,
                                                       const float* __restrict__ norm_max, int k, int tiles,
                                                       float* __restrict__ out, Where where) {
    constexpr int TILE_FLOATS_ = TILE_N_ * DIM_ + TILE_N_;
    const unsigned offset = score_offset(bound_max, norm_max);
    const long long total = (long long)tiles * TILE_FLOATS_;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const int tile = int(i / TILE_FLOATS_), at = int(i % TILE_FLOATS_);
        if (at >= TILE_N_ * DIM_) {
            out[i] = offset_half_norm(half_norms, tile * TILE_N_ + at - TILE_N_ * DIM_, k, offset);
            continue;
        }
        int centroid, coordinate;
        where(at, centroid, coordinate);
        const int column = tile * TILE_N_ + centroid;
        out[i] = column < k ? c_tf32[(long long)column * DIM_ + coordinate] : 0.0f;
    }
}

// Two floats rounded to fp16 (to nearest) in one word, `low` in the low half, at the lower address.
__device__ __forceinline__ unsigned half2_bits(float low, float high) {
    unsigned two;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(two) : "f"(high), "f"(low));
    return two;
}

// The same in fp16 (issue 50): the float32 centroids times sigma, rounded to fp16, two to a word;
// NORMS_AT_ words of coordinates a tile, then its h + M. where(element, centroid, coordinate) as
// above, for each fp16 element; a coordinate from DIM_ on (a k-step's padding) is a zero.
template <int TILE_N_, int DIM_, int NORMS_AT_, typename Where>
__device__ __forceinline__ void lay_out_half_centroid_tiles(const float* __restrict__ centroids,
                                                            const float* __restrict__ half_norms,
                                                            const float* __restrict__ bound_max,
                                                            const float* __restrict__ norm_max, int k, int tiles,
                                                            float* __restrict__ out, float sigma, Where where) {
    constexpr int TILE_WORDS_ = NORMS_AT_ + TILE_N_;
    const unsigned offset = score_offset(bound_max, norm_max);
    const long long total = (long long)tiles * TILE_WORDS_;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const int tile = int(i / TILE_WORDS_), at = int(i % TILE_WORDS_);
        if (at >= NORMS_AT_) {
            out[i] = offset_half_norm(half_norms, tile * TILE_N_ + at - NORMS_AT_, k, offset);
            continue;
        }
        float pair[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            int centroid, coordinate;
            where(2 * at + e, centroid, coordinate);
            const int column = tile * TILE_N_ + centroid;
            pair[e] = column < k && coordinate < DIM_ ? centroids[(long long)column * DIM_ + coordinate] * sigma : 0.0f;
        }
        reinterpret_cast<unsigned*>(out)[i] = half2_bits(pair[0], pair[1]);
    }
}

// ------------------------------------------------------------------ PTX wrappers

__device__ __forceinline__ unsigned shared_address(const void* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}

__device__ __forceinline__ void barrier_init(unsigned long long* bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void barrier_wait(unsigned long long* bar, unsigned parity) {
    asm volatile(
        "{\n.reg .pred done;\n"
        "wait_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra wait_%=;\n}" ::"r"(shared_address(bar)), "r"(parity) : "memory");
}

__device__ __forceinline__ void barrier_arrive(unsigned long long* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(bar)) : "memory");
}

// The producer: a stage's bytes are expected (the producer's arrival), then brought by the copy
// engine, in one or more bulk copies that each count their bytes on the same barrier.
__device__ __forceinline__ void expect_bytes(unsigned long long* bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void bulk_copy(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(shared_address(dst)), "l"(src), "r"(bytes), "r"(shared_address(bar)) : "memory");
}

// Shared-memory matrix descriptor: no swizzle, K-major; leading byte offset = the next 16 bytes of
// coordinates' core matrix (4 TF32, 8 fp16: `leading`), stride byte offset = the next 8 rows'. Its low word holds
// the address (a 14-bit field, as shared memory is under 256 KB) and the leading offset, its high
// word the stride: k-step kk's descriptor is the first one's low word + (2 leading >> 4) kk, one
// uniform add; rebuilt for each k-step, the descriptors took 50 more of a tile's 623 instructions
// at d = 128.
constexpr unsigned DESCRIPTOR_HIGH = (CORE_BYTES & 0x3FFFF) >> 4;
__device__ __forceinline__ unsigned descriptor_low(unsigned address, unsigned leading) {
    return ((address & 0x3FFFF) >> 4) | ((leading & 0x3FFFF) >> 4) << 16;
}

// wgmma's accumulator operands, read and written: acc[i] to acc[i + 31], in order (the products'
// asm statements list 64 or 128 of them).
#define ACCUMULATORS_8(i)                                                                                     \
    "+f"(acc[i]), "+f"(acc[i + 1]), "+f"(acc[i + 2]), "+f"(acc[i + 3]), "+f"(acc[i + 4]), "+f"(acc[i + 5]),  \
        "+f"(acc[i + 6]), "+f"(acc[i + 7])
#define ACCUMULATORS_32(i) ACCUMULATORS_8(i), ACCUMULATORS_8(i + 8), ACCUMULATORS_8(i + 16), ACCUMULATORS_8(i + 24)

// Keeps the compiler from moving reads or writes of the accumulators across wgmma's fence/wait.
template <int N>
__device__ __forceinline__ void pin(float (&acc)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(acc[i])::"memory");
}

// The ring of stages: full[s] (one arrival, the producer's, plus the bytes its copies bring) and
// empty[s] (every consumer warp's arrival), set up by thread 0 before any thread uses them.
__device__ __forceinline__ void ring_start(unsigned long long* full, unsigned long long* empty, int stages,
                                           unsigned consumer_warps) {
    if (threadIdx.x == 0) {
        for (int s = 0; s < stages; ++s) {
            barrier_init(&full[s], 1);
            barrier_init(&empty[s], consumer_warps);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
}

// The producer's stage for ring position p, once the consumers have released what it held.
__device__ __forceinline__ int ring_claim(unsigned long long* empty, long long p, int stages) {
    const int s = int(p % stages);
    if (p >= stages) barrier_wait(&empty[s], unsigned((p / stages - 1) & 1));
    return s;
}

// A consumer warp's arrival on an mbarrier (the ring's empty[s]): lane 0's, once the warp has
// converged, so that every lane's reads of the stage are done.
__device__ __forceinline__ void warp_arrive(unsigned long long* barrier, int lane) {
    __syncwarp();
    if (lane == 0) barrier_arrive(barrier);
}

// A consumer's next stage of the ring, and the parity of its fill.
__device__ __forceinline__ void ring_next(int& s, unsigned& phase, int stages) {
    if (++s == stages) s = 0, phase ^= 1;
}

// Both passes' hopper_assign take one argument list (hopper_pass.py launches either with the same
// tuple): the rows as the pass reads them (x_tf32, their fp16 copy, or hopper_wide.cu's tiled copy),
// then the rest.
#define HOPPER_ASSIGN_PARAMETERS(rows)                                                                              \
    const float* __restrict__ rows, const float* __restrict__ x_norm, const float* __restrict__ tiles,             \
        const float* __restrict__ bound_max, int* __restrict__ labels, int* __restrict__ flagged,                  \
        float* __restrict__ limits, unsigned* __restrict__ flagged_count, float* __restrict__ floor_out,           \
        int* __restrict__ cand_rows, int* __restrict__ cand_sizes, int* __restrict__ cand_index,                   \
        unsigned* __restrict__ cand_count, const float* __restrict__ norm_max, long long n, int tile_count,        \
        float eps, float eta, float underflow, float margin, int pack_bits, unsigned pack_scale, int candidates,   \
        int columns, int keep_floor, float unscale, float alpha, float beta, float c_limit

// ------------------------------------------------------------------ the epilogue's pieces

// The places of this lane's two rows in two lists (list l's rows where keep[l][0] / keep[l][1], its
// length at count[l]): one atomic per warp and list, lane l's, both in flight at once, since the
// round trip to L2 sits on the way from one row tile to the next.
__device__ __forceinline__ void warp_append(const bool (&keep)[2][2], unsigned* const (&count)[2], int lane,
                                            unsigned (&place)[2][2]) {
    unsigned kept[2][2], base = 0;
#pragma unroll
    for (int l = 0; l < 2; ++l) {
        kept[l][0] = __ballot_sync(FULL, keep[l][0]), kept[l][1] = __ballot_sync(FULL, keep[l][1]);
        if (lane == l && (kept[l][0] | kept[l][1])) base = atomicAdd(count[l], __popc(kept[l][0]) + __popc(kept[l][1]));
    }
    const unsigned below = (1u << lane) - 1;
#pragma unroll
    for (int l = 0; l < 2; ++l) {
        const unsigned start = __shfl_sync(FULL, base, l);
        place[l][0] = start + __popc(kept[l][0] & below);
        place[l][1] = start + __popc(kept[l][0]) + __popc(kept[l][1] & below);
    }
}

__device__ __forceinline__ unsigned min4(unsigned v) {  // over the four threads of a row
    v = min(v, __shfl_xor_sync(FULL, v, 1));
    return min(v, __shfl_xor_sync(FULL, v, 2));
}

__device__ __forceinline__ unsigned or4(unsigned v) {
    v |= __shfl_xor_sync(FULL, v, 1);
    return v | __shfl_xor_sync(FULL, v, 2);
}

__device__ __forceinline__ int slot_of(int q, int t) { return 8 * (q >> 1) + 2 * t + (q & 1); }

// An offset score y packed with its tile number: y's bits x scale (2^bits) + lift (the tile number
// less the binade's bits x scale), one IMAD, on the FMA pipe rather than the ALU pipe that runs the
// min / max. scale is a parameter, not a shift the compiler could see, so that it stays a multiply.
__device__ __forceinline__ unsigned pack(float y, unsigned scale, unsigned lift) {
    unsigned packed;
    asm("mad.lo.u32 %0, %1, %2, %3;" : "=r"(packed) : "r"(__float_as_uint(y)), "r"(scale), "r"(lift));
    return packed;
}

// A packed score's value, y - M: exact, as y and M are floats of one binade.
__device__ __forceinline__ float unpack(unsigned packed, int bits, unsigned offset) {
    return __uint_as_float((offset & EXPONENT) | packed >> bits) - __uint_as_float(offset);
}

// What the pass decides for one row from its 32 slots (the four threads of the row agree on it).
struct Outcome {
    float top, runner_up, error, limit;
    int label, size;
    unsigned near, crowded;
    bool flag, short_list, listed;
};

__device__ __forceinline__ Outcome settle(const unsigned (&best)[8], const unsigned (&second)[8], float norm,
                                          bool row_ok, int t, int bits, unsigned offset, float c_max, float h_max,
                                          float eps, float eta, float underflow, float margin, int candidates,
                                          int columns, float alpha, float beta, float c_limit) {
    Outcome o;
    const unsigned mask = (1u << bits) - 1;
    unsigned top = best[0];
#pragma unroll
    for (int q = 1; q < 8; ++q) top = min(top, best[q]);
    top = min4(top);
    o.top = unpack(top, bits, offset);
    int winning = SLOTS;
#pragma unroll
    for (int q = 0; q < 8; ++q)
        if (best[q] == top) winning = min(winning, slot_of(q, t));
    winning = min(winning, __shfl_xor_sync(FULL, winning, 1));
    winning = min(winning, __shfl_xor_sync(FULL, winning, 2));
    unsigned runner_up = NONE;
#pragma unroll
    for (int q = 0; q < 8; ++q) runner_up = min(runner_up, slot_of(q, t) == winning ? second[q] : best[q]);
    o.runner_up = unpack(min4(runner_up), bits, offset);
    o.label = int(top & mask) * SLOTS + winning;
    // As certified_assign: E(x) = eps |x| C + eta H, plus the offset scores' two roundings and
    // bound.underflow_floor (subnormal products, which no relative bound covers); in fp16, plus
    // alpha (|x| + C) + beta (alpha and beta already divided by sigma and sigma^2: fp16_bound.py).
    // c_limit: the largest centroid norm whose coordinates fit fp16 once scaled (65504 / sigma;
    // +inf in TF32); past it a tile may hold inf, and nothing is certain.
    const float error = offset >> 23 == UNBOUNDED_OFFSET || !(c_max <= c_limit)
                            ? __int_as_float(0x7f800000)  // scores past the offset's reach: nothing is certain
                            : eps * norm * c_max + eta * h_max + __uint_as_float(offset) * 0x1p-22f + underflow
                                  + alpha * (norm + c_max) + beta;
    o.error = error;
    o.flag = row_ok && !((o.runner_up - o.top) > margin * error);
    o.limit = o.top + margin * error;
    o.near = o.crowded = 0;
    o.size = 0;
    o.short_list = false;
    if (candidates > 0) {
        // unpack(v) <= limit where the float (binade | v >> bits) <= limit + M, a float, so
        // rounded down; that is v <= within, every tile number of its mantissa. The binade's
        // largest float is the absent columns', which are never within.
        const float reach = fminf(__fadd_rd(o.limit, __uint_as_float(offset)), __uint_as_float(offset | (MANTISSA - 1)));
        const unsigned within = (__float_as_uint(reach) & MANTISSA) << bits | mask;
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            o.near |= unsigned(best[q] <= within) << slot_of(q, t);
            o.crowded |= unsigned(second[q] <= within) << slot_of(q, t);
        }
        o.near = or4(o.near), o.crowded = or4(o.crowded);
        o.size = __popc(o.near);
        o.short_list = o.flag && o.size <= candidates && (columns || o.crowded == 0);
    }
    o.listed = o.flag && !o.short_list;
    return o;
}


// One tile's scores folded into each row's best two per slot: the accumulator of an m64nNk8
// product gives thread t the columns 8 j + 2 t + e (j < N / 8, e < 2) of rows g and g + 8, acc[4 j
// + 2 r + e]; column c is slot c % 32 of the tile of SLOTS numbered tile_number + c / 32. half:
// the tile's h + M, one float per column. unscale: what scales the products back (1 in TF32,
// sigma^-2 in fp16: a power of two, so h + M - acc unscale rounds once, as h + M - acc does).
template <int N>
__device__ __forceinline__ void fold_tile(const float (&acc)[N / 2], const float* half_norms, int t, unsigned lift,
                                          unsigned tile_number, unsigned scale, float unscale, unsigned (&best)[2][8],
                                          unsigned (&second)[2][8]) {
    const float2* half = reinterpret_cast<const float2*>(half_norms);
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
        const float2 h = half[4 * j + t];  // columns 8 j + 2 t and + 1
        const unsigned tile_lift = lift + tile_number + unsigned(j / 4);
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const unsigned packed = pack(fmaf(acc[4 * j + 2 * r + e], -unscale, e ? h.y : h.x), scale, tile_lift);
                const int q = 2 * (j % 4) + e;
                second[r][q] = min(second[r][q], max(best[r][q], packed));
                best[r][q] = min(best[r][q], packed);
            }
    }
}

// The outputs of a thread's two rows (first and first + 8), settled as o: labels, the floor, and
// each row's place on the list its outcome puts it on (the scan's, with its limit, or the short
// one, with its candidates).
__device__ __forceinline__ void record_rows(const Outcome (&o)[2], const unsigned (&best)[2][8], int first, long long n,
                                            int t, int lane, int pack_bits, int candidates, int keep_floor,
                                            int* __restrict__ labels, int* __restrict__ flagged,
                                            float* __restrict__ limits, unsigned* flagged_count,
                                            float* __restrict__ floor_out, int* __restrict__ cand_rows,
                                            int* __restrict__ cand_sizes, int* __restrict__ cand_index,
                                            unsigned* cand_count) {
    // The lists' places (short_list is false everywhere without candidates, so no atomic then).
    const bool keep[2][2] = {{o[0].listed && t == 0, o[1].listed && t == 0},
                             {o[0].short_list && t == 0, o[1].short_list && t == 0}};
    unsigned* const counts[2] = {flagged_count, cand_count};
    unsigned place[2][2];
    warp_append(keep, counts, lane, place);
    const unsigned* listed_at = place[0];
    unsigned short_at[2] = {__shfl_sync(FULL, place[1][0], lane & ~3), __shfl_sync(FULL, place[1][1], lane & ~3)};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int row = first + 8 * r;
        if (o[r].short_list) {
            const unsigned place = short_at[r];
            if (t == 0) cand_rows[place] = int(row), cand_sizes[place] = o[r].size;
#pragma unroll
            for (int q = 0; q < 8; ++q) {
                const int slot = slot_of(q, t);
                if (o[r].near >> slot & 1)
                    cand_index[(long long)place * candidates + __popc(o[r].near & ((1u << slot) - 1))] =
                        o[r].crowded >> slot & 1 ? -1 - slot : int(best[r][q] & ((1u << pack_bits) - 1)) * SLOTS + slot;
            }
        }
        if (t == 0 && row < n) {
            labels[row] = o[r].label;
            if (keep_floor) floor_out[row] = (o[r].flag ? o[r].top : o[r].runner_up) - o[r].error;
            if (o[r].listed) flagged[listed_at[r]] = int(row), limits[listed_at[r]] = o[r].limit;
        }
    }
}
