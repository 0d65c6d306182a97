// kmbench-gpu's TF32 pass written for Hopper (sm_90a), below Triton: the packed epilogue of
// tensor_kernels.certified_assign (rows on chip, 32 slots) with warpgroup MMA (wgmma).
//
// Why by hand (NOTES.md, "A hand-written Hopper pass"): Triton keeps a block's rows in shared
// memory for TF32 and waits for each tile's products before its epilogue, so one block cannot
// overlap the two, and an m64n32k8 product reads 0.19 bytes of shared memory per multiply-add
// where the SM feeds 0.125. Here
//   - each consumer thread holds its rows' TF32 coordinates in registers (wgmma's A operand from
//     registers), so a product reads only its centroids from shared memory: an m64n128k8 reads
//     4 KB for 64k multiply-adds, 0.06 bytes each;
//   - GROUPS consumer warpgroups of 64 rows each (two; three at d <= 64, where the rows leave
//     registers for them) take the same centroid tiles: while one runs its epilogue, the others'
//     products keep the tensor cores busy;
//   - one producer thread brings each tile of 128 centroids with one bulk copy (the copy engine)
//     into a ring of STAGES buffers, signalled by mbarriers: full (bytes arrived) and empty
//     (every consumer warp is done with it);
//   - the grid is persistent: one block per SM walks the row tiles.
//
// The tile comes from global memory already in wgmma's canonical layout (no swizzle, K-major:
// core matrices of 8 centroids x 4 coordinates, 128 contiguous bytes), built by centroid_tiles
// once per iteration. The coordinates are permuted (the same way for rows and centroids, which
// leaves every dot product's terms as they were): k-step kk's A fragment of thread t (lane % 4)
// is its row's coordinates (DIM / 4) t + 2 kk and + 1, so a thread's coordinates of one row are
// DIM / 4 contiguous floats, loaded with 16-byte loads, and a row's four threads read it whole.
//
// The epilogue is certified_assign's packed one with tiles of 128 folded into 32 slots: the
// accumulator gives thread t the columns 8 j + 2 t + e (j < 16, e < 2) of rows g and g + 8
// (g = lane / 4), so column c is slot c % 32 of tile c / 32, and each thread keeps 8 slots per
// row. Certificate, limit, floor and candidate lists follow the Triton kernel's rules; the lists'
// order differs, which no reader depends on.
//
// The scores are packed differently, the packing an IMAD beside the ALU pipe's min / max (4-8%
// faster at d <= 64; NOTES.md, "Scores packed as integers", measured every instruction a score to
// cost about the same whatever its pipe): every score is offset by M = 1.5 x 2^E, where 2^(E-2) exceeds every |score| (|x| C + H, from the
// largest point norm and the bound's maxima), so y = (h + M) - x.c lies in [1.25, 1.75] 2^E: one
// binade, where a float's bits order as its value and its 23 mantissa bits are all that vary.
// One IMAD, y's bits x 2^bits + (tile number - the binade's bits x 2^bits), leaves the mantissa
// above the tile number in an unsigned int, compared with unsigned min / max. y carries two
// roundings of at most half an ulp of M (h + M in the tile, and the subtraction): the pass adds
// 2^-22 M (3 ulp) to each row's E in place of the Triton pass's packing error.
//
// With HALF (issue 50), the same pass in fp16 (m64n128k16, twice TF32's rate and half its bytes):
// rows and centroids are scaled by one power of two, sigma, that puts the largest row norm in
// [2^14, 2^15), and rounded to fp16 (10 bits, as TF32), two to a register; the products are
// exact in FP32 and accumulate in FP32 as TF32's do, and each score is scaled back by sigma^-2,
// exactly, in the FMA that subtracts it from h + M. fp16_bound.py derives the bound: TF32's plus
// what inputs below fp16's smallest normal lose, alpha (|x| + C) / sigma + beta / sigma^2, which
// hopper_pass.py gives the kernel as two numbers. A centroid's coordinates fit fp16 once scaled
// while its norm is at most c_limit = 65504 / sigma: Lloyd's means of these rows always are (a
// norm is convex). Where the largest centroid norm C, which the update computes each iteration,
// passes c_limit (a start far from the data; a shard's share of rows, whose sigma is its own,
// against centroids of every shard), settle certifies nothing: exact, slow.

#include "hopper_common.cuh"

#ifndef DIM
#error "compile with -DDIM=<d>, a multiple of 16 up to 128"
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef GROUPS
#define GROUPS 2
#endif
#ifndef HALF
#define HALF 0
#endif

constexpr int TILE_N = 128;                    // centroids per tile: one m64n128k8 per k-step
constexpr int FOLDS = TILE_N / SLOTS;          // tiles of SLOTS in one tile
constexpr int ROWS = 64 * GROUPS;              // rows per row tile: GROUPS warpgroups of 64
#if HALF
typedef unsigned Held;                         // two fp16 coordinates of a row
constexpr int ELEMENT_BYTES = 2, PER_KSTEP = 16;
#else
typedef float Held;                            // one TF32 coordinate
constexpr int ELEMENT_BYTES = 4, PER_KSTEP = 8;
#endif
constexpr int KSTEPS = DIM / PER_KSTEP;
constexpr int HELD = DIM / 4;                  // coordinates of one row a thread holds
constexpr int HELD_WORDS = HELD * ELEMENT_BYTES / 4;  // the registers they take
constexpr int NORMS_AT = TILE_N * DIM * ELEMENT_BYTES / 4;  // a tile's centroids, in 4-byte words,
constexpr int TILE_FLOATS = NORMS_AT + TILE_N;              // then their half norms (floats)
constexpr unsigned TILE_BYTES = TILE_FLOATS * 4;
constexpr int CONSUMER_WARPS = 4 * GROUPS;
// The producer is a warpgroup that hands its registers to the consumers (setmaxnreg): one warp
// alone would cap every thread at 168 registers, since an SM's four schedulers each hold a
// quarter of its registers and nine warps put three on one of them, where the consumers want
// about 190 at d = 128 (one warp measured 10-30% slower, NOTES.md).
constexpr int THREADS = (CONSUMER_WARPS + 4) * 32;
// The register file (64K) split between the producer and the consumers, in steps of 8: with two
// consumer warpgroups, 40 + 2 x 232; with three (d <= 64, whose rows take half the registers),
// 24 + 3 x 160.
constexpr int PRODUCER_REGISTERS = GROUPS == 2 ? 40 : 24;
constexpr int CONSUMER_REGISTERS = GROUPS == 2 ? 232 : 160;
static_assert(GROUPS == 2 || GROUPS == 3, "two or three consumer warpgroups");
static_assert(128 * (PRODUCER_REGISTERS + GROUPS * CONSUMER_REGISTERS) <= 65536, "the register file");
constexpr unsigned K_CORE_STRIDE = (TILE_N / 8) * CORE_BYTES;  // next 16 bytes of coordinates (4 TF32, 8 fp16)
constexpr unsigned DESCRIPTOR_STEP = (2 * K_CORE_STRIDE) >> 4;  // next k-step

static_assert(DIM % 16 == 0 && DIM <= 128,
              "rows are held in registers, DIM / 4 floats a thread by 16-byte loads: DIM a multiple of 16, at most 128");
static_assert(TILE_BYTES % 16 == 0, "bulk copies move multiples of 16 bytes");

// ------------------------------------------------------------------ layout of a tile

// Where logical coordinate `kl` of a wgmma k-step sits in a row (the permutation above). In fp16,
// k-step kk's A fragment of thread t is coordinates 16 kk + 2 t, + 1 (a register) and 16 kk + 2 t
// + 8, + 9 (the next), so its coordinates are again DIM / 4 contiguous ones, two to a register.
__device__ __forceinline__ int physical_coordinate(int kl) {
#if HALF
    const int kk = kl / 16, t = (kl % 8) / 2, h = (kl % 16) / 8, e = kl % 2;
    return (DIM / 4) * t + 4 * kk + 2 * h + e;
#else
    const int kk = kl / 8, t = kl % 4, h = (kl % 8) / 4;
    return (DIM / 4) * t + 2 * kk + h;
#endif
}

// Tiles of TILE_N centroids in the canonical layout, each followed by its half norms plus M;
// columns past k are zero centroids whose h + M is the binade's largest float, above every real
// score (the Triton pass's PACKED_ABSENT).
#if HALF
// In fp16 (the centroids as float32, scaled by sigma): each word holds two coordinates, element
// at = ((j (TILE_N / 8) + i8) 8 + r) 8 + q of the tile and the next.
extern "C" __global__ void centroid_tiles(const float* __restrict__ centroids, const float* __restrict__ half_norms,
                                          const float* __restrict__ bound_max, const float* __restrict__ norm_max,
                                          int k, int tiles, float* __restrict__ out, float sigma) {
    lay_out_half_centroid_tiles<TILE_N, DIM, NORMS_AT>(centroids, half_norms, bound_max, norm_max, k, tiles, out, sigma,
                                                       [](int element, int& centroid, int& coordinate) {
                                                           const int q = element % 8, r = (element / 8) % 8;
                                                           const int core = element / 64;
                                                           centroid = (core % (TILE_N / 8)) * 8 + r;
                                                           coordinate = physical_coordinate(8 * (core / (TILE_N / 8)) + q);
                                                       });
}
#else
extern "C" __global__ void centroid_tiles(const float* __restrict__ c_tf32, const float* __restrict__ half_norms,
                                          const float* __restrict__ bound_max, const float* __restrict__ norm_max,
                                          int k, int tiles, float* __restrict__ out) {
    // at = ((j (TILE_N / 8) + i8) 8 + r) 4 + q: core matrix (i8 along centroids, j along K).
    lay_out_centroid_tiles<TILE_N, DIM>(c_tf32, half_norms, bound_max, norm_max, k, tiles, out,
                                        [](int at, int& centroid, int& coordinate) {
                                            const int q = at % 4, r = (at / 4) % 8, core = at / 32;
                                            centroid = (core % (TILE_N / 8)) * 8 + r;
                                            coordinate = physical_coordinate(4 * (core / (TILE_N / 8)) + q);
                                        });
}
#endif

// acc (+)= A (rows, from registers) x B (the tile's k-step, shared memory, its descriptor's two
// words), 64 x 128 x 8 in TF32, or 64 x 128 x 16 in fp16 (B not transposed: K-major).
#if HALF
#define MMA_64X128 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
#define MMA_TAIL "b, p, 1, 1, 0;\n}\n"
__device__ __forceinline__ unsigned held_bits(unsigned two) { return two; }
#else
#define MMA_64X128 "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
#define MMA_TAIL "b, p, 1, 1;\n}\n"
__device__ __forceinline__ unsigned held_bits(float one) { return __float_as_uint(one); }
#endif
__device__ __forceinline__ void mma_64x128(float (&acc)[64], Held a0, Held a1, Held a2, Held a3, unsigned b_low,
                                           int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\n.reg .b64 b;\nsetp.ne.b32 p, %69, 0;\nmov.b64 b, {%68, %70};\n"
        MMA_64X128
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, "
        "%22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, "
        "%43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "{%64, %65, %66, %67}, " MMA_TAIL
        : ACCUMULATORS_32(0), ACCUMULATORS_32(32)
        : "r"(held_bits(a0)), "r"(held_bits(a1)), "r"(held_bits(a2)), "r"(held_bits(a3)),
          "r"(b_low), "r"(accumulate), "n"(DESCRIPTOR_HIGH));
}

#ifdef TAKE_TURNS
// The consumer warpgroups take turns at the tensor cores in a ring (named barrier 1 + g is group
// g's turn, 256 threads: g waits, the group before it arrives), as CUTLASS's ping-pong kernels
// order theirs; left to themselves they may issue together and then all run their epilogues while
// the tensor cores idle. hopper_pass.py sets it (NOTES.md has the measurement).
__device__ __forceinline__ void wait_turn(int group) { asm volatile("bar.sync %0, 256;" ::"r"(1 + group) : "memory"); }
__device__ __forceinline__ void pass_turn(int group) {
    asm volatile("bar.arrive %0, 256;" ::"r"(1 + (group + 1) % GROUPS) : "memory");
}
#endif

// A row's coordinates that thread t holds (zeros past n): DIM / 4 contiguous ones, by 16-byte
// loads (TF32) or 8-byte ones (fp16, two coordinates a word). A thread's two rows are `first` and
// first + 8 (wgmma's accumulator rows g and g + 8).
__device__ __forceinline__ void load_rows(Held (&held)[2][HELD_WORDS], int first, const float* x, long long n, int t) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int row = first + 8 * r;
        const long long word = ((long long)row * DIM + HELD * t) * ELEMENT_BYTES / 4;
#if HALF
        const uint2* source = reinterpret_cast<const uint2*>(x + word);
#pragma unroll
        for (int v = 0; v < HELD_WORDS / 2; ++v) {
            const uint2 two = row < n ? source[v] : make_uint2(0u, 0u);
            held[r][2 * v] = two.x, held[r][2 * v + 1] = two.y;
        }
#else
        const float4* source = reinterpret_cast<const float4*>(x + word);
#pragma unroll
        for (int v = 0; v < HELD / 4; ++v) {
            const float4 four = row < n ? source[v] : make_float4(0.f, 0.f, 0.f, 0.f);
            held[r][4 * v] = four.x, held[r][4 * v + 1] = four.y, held[r][4 * v + 2] = four.z, held[r][4 * v + 3] = four.w;
        }
#endif
    }
}

extern "C" __global__ void __launch_bounds__(THREADS, 1) hopper_assign(HOPPER_ASSIGN_PARAMETERS(x)) {
    extern __shared__ __align__(128) unsigned char shared[];
    unsigned long long* full = reinterpret_cast<unsigned long long*>(shared);
    unsigned long long* empty = full + STAGES;
    float* stages = reinterpret_cast<float*>(shared + 128);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long row_tiles = (n + ROWS - 1) / ROWS;
    // Block b takes row tiles b, b + grid, ...: `rounds` of them. The ring's positions: every tile
    // once per row tile.
    const int rounds = int((row_tiles - blockIdx.x + gridDim.x - 1) / gridDim.x);
    const long long positions = (long long)rounds * tile_count;
    ring_start(full, empty, STAGES, CONSUMER_WARPS);

    if (warp >= CONSUMER_WARPS) {  // the producer
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(PRODUCER_REGISTERS));
        if (warp == CONSUMER_WARPS && lane == 0)
            for (long long p = 0; p < positions; ++p) {
                const int s = ring_claim(empty, p, STAGES);
                expect_bytes(&full[s], TILE_BYTES);
                bulk_copy(stages + s * TILE_FLOATS, tiles + (p % tile_count) * TILE_FLOATS, TILE_BYTES, &full[s]);
            }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(CONSUMER_REGISTERS));
    const int g = lane / 4, t = lane % 4, group = warp / 4;
    // pack()'s lift for tile number 0: less the binade's bits x 2^bits (wrapping).
    const unsigned lift = 0u - (score_offset(bound_max, norm_max) & EXPONENT) * pack_scale;
    // This thread's first row (its second is 8 on) in the block's row tile, and from one row tile to
    // the next. Rows fit an int: n rows of d >= 16 floats fill the GPU's memory well below 2^31.
    int first = blockIdx.x * ROWS + group * 64 + (warp % 4) * 16 + g;
    const int stride = gridDim.x * ROWS;
    Held held[2][HELD_WORDS];
    float norms[2];
    load_rows(held, first, x, n, t);
#pragma unroll
    for (int r = 0; r < 2; ++r) norms[r] = first + 8 * r < n ? x_norm[first + 8 * r] : 0.0f;
#ifdef TAKE_TURNS
    if (group == GROUPS - 1 && rounds > 0) pass_turn(group);  // the first turn is group 0's (if any)
#endif
    int s = 0;              // the ring's stage of the next tile
    unsigned phase = 0;     // and the parity of its fill
    for (int round = 0; round < rounds; ++round) {
        const bool last_rows = round + 1 == rounds;
        unsigned best[2][8], second[2][8];
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
            for (int q = 0; q < 8; ++q) best[r][q] = second[r][q] = NONE;

        for (int tile = 0; tile < tile_count; ++tile) {
            const float* stage = stages + s * TILE_FLOATS;
            barrier_wait(&full[s], phase);
#ifdef TAKE_TURNS
            wait_turn(group);
#endif
            float acc[64];
            pin(acc);
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
            const unsigned low = descriptor_low(shared_address(stage), K_CORE_STRIDE);
#pragma unroll
            for (int kk = 0; kk < KSTEPS; ++kk)
                mma_64x128(acc, held[0][2 * kk], held[1][2 * kk], held[0][2 * kk + 1], held[1][2 * kk + 1],
                           low + DESCRIPTOR_STEP * kk, kk > 0);
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#ifdef TAKE_TURNS
            // Every wait has its arrive: the last group's last would give group 0 a turn it never takes.
            if (group != GROUPS - 1 || !(last_rows && tile == tile_count - 1)) pass_turn(group);
#endif
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
            pin(acc);
            // The next rows load while this tile's epilogue and the rows' outcomes run.
            if (tile == tile_count - 1 && !last_rows) load_rows(held, first + stride, x, n, t);
            fold_tile<TILE_N>(acc, stage + NORMS_AT, t, lift, unsigned(tile * FOLDS), pack_scale, unscale, best, second);
            warp_arrive(&empty[s], lane);
            ring_next(s, phase, STAGES);
        }

        // Each row's best two over its 32 slots, its certificate, and the lists it goes on.
        Outcome o[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const bool row_ok = first + 8 * r < n;
            // The bound's maxima are read here, from L1, not held through the tiles: with three
            // consumer warpgroups at d = 64 every register counts.
            o[r] = settle(best[r], second[r], norms[r], row_ok, t, pack_bits, score_offset(bound_max, norm_max),
                          bound_max[0], bound_max[1], eps, eta, underflow, margin, candidates, columns, alpha, beta,
                          c_limit);
        }
        record_rows(o, best, first, n, t, lane, pack_bits, candidates, keep_floor, labels, flagged, limits,
                    flagged_count, floor_out, cand_rows, cand_sizes, cand_index, cand_count);
        // The next rows' norms load only now, into the same registers: they are needed at those
        // rows' outcomes, a row tile away.
        first += stride;
#pragma unroll
        for (int r = 0; r < 2; ++r) norms[r] = first + 8 * r < n ? x_norm[first + 8 * r] : 0.0f;
    }
}
