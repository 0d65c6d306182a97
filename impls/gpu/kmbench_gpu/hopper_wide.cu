// kmbench-gpu's TF32 (or, with HALF, fp16) pass for Hopper (sm_90a) where rows no longer fit
// registers (d > 128): hopper_pass.cu's epilogue and certificate, with both operands of wgmma from
// shared memory.
//
// Why (NOTES.md, "Rows from shared memory"): above d = 128 Triton's pass streams the rows in
// chunks of 32 coordinates and ran at 47% of the TF32 peak at 1e6 x 768 (27 ms of a 33 ms
// iteration); it keeps every tile's best two for the re-check rather than a short list of
// candidates, and its re-check took 4.4 ms there. Here
//   - a block's 128 rows (two consumer warpgroups of 64) meet 256 centroids a tile: one
//     m64n256k8 per k-step and warpgroup, its accumulator 128 floats a thread. A k-step reads
//     2 + 8 KB of shared memory for 128k multiply-adds, 0.08 bytes each where the SM feeds 0.125;
//   - one producer thread brings each chunk of 32 coordinates of the rows and of the tile (16 +
//     32 KB, and the tile's half norms with its last chunk) by bulk copies into a ring of STAGES
//     buffers, signalled by mbarriers as in hopper_pass.cu. The consumers release a chunk as soon
//     as the products that read it are done (wgmma.wait_group 1), so the copies run one chunk
//     behind the tensor cores;
//   - the rows come from a copy laid out once per run (row_tiles) in the operand's canonical layout,
//     as the centroids come from centroid_tiles once per iteration: a bulk copy moves contiguous
//     bytes only;
//   - after a tile's last chunk both warpgroups run the packed epilogue (fold_tile) on the same
//     columns as hopper_pass.cu: at d = 768 it is a few percent of the tile's products, so the
//     warpgroups share every chunk at once. Where a tile's chunks fit the ring (TAKE_TURNS: fp16 up
//     to d = 256), they take turns instead, one's epilogue beside the other's products (below).
// Each row is settled from its 32 slots as in hopper_pass.cu, so candidates are listed for the
// re-check (recheck.cu's candidate_recheck) where the Triton pass kept tile records. The figures
// above are TF32's; the fp16 form (HALF, below) moves the same bytes for twice the multiply-adds.

#include "hopper_common.cuh"

#ifndef DIM
#error "compile with -DDIM=<d>, a multiple of 8"
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef HALF
#define HALF 0
#endif

// With HALF (issue 50), the same pass in fp16 as hopper_pass.cu's: rows and centroids scaled by
// sigma and rounded to fp16, the products m64n256k16, each score scaled back in fold_tile's FMA,
// the bound's fp16 terms and c_limit as there. A core matrix is 8 rows x 16 bytes in either (4 TF32
// or 8 fp16 coordinates), and a k-step reads 32 bytes of each row (8 TF32 or 16 fp16), so the
// stages, the bulk copies and the descriptors are the same bytes: a stage's 128 bytes of a row hold
// 64 coordinates instead of 32, and d = 768 takes 12 chunks of 4 k-steps instead of 24. A d that is
// no multiple of 16 is padded with zero coordinates to the next k-step (zero products add nothing).
#if HALF
constexpr int ELEMENT_BYTES = 2, PER_KSTEP = 16;
#else
constexpr int ELEMENT_BYTES = 4, PER_KSTEP = 8;
#endif
constexpr int TILE_N = 256;                    // centroids per tile: one m64n256k8 (k16) per k-step
constexpr int FOLDS = TILE_N / SLOTS;          // tiles of SLOTS in one tile
constexpr int GROUPS = 2;                      // consumer warpgroups of 64 rows
constexpr int ROWS = 64 * GROUPS;              // rows per row tile
constexpr int PER_CORE = 16 / ELEMENT_BYTES;   // coordinates of a row in a core matrix
constexpr int CHUNK = 128 / ELEMENT_BYTES;     // coordinates per stage: 128 bytes of a row
constexpr int CHUNK_WORDS = 32;                // the same in 4-byte words
constexpr int PADDED = (DIM + PER_KSTEP - 1) / PER_KSTEP * PER_KSTEP;  // coordinates, padded to a k-step
constexpr int CHUNKS = (PADDED + CHUNK - 1) / CHUNK;
constexpr int LAST_STEPS = (PADDED - CHUNK * (CHUNKS - 1)) / PER_KSTEP;  // k-steps of the last chunk
constexpr int KSTEP_BYTES = 32;                // of each row, in either
constexpr int NORMS_AT = TILE_N * PADDED * ELEMENT_BYTES / 4;  // a tile's centroids in words, chunk after chunk,
constexpr int TILE_WORDS = NORMS_AT + TILE_N;                  // then their h + M (floats)
constexpr int ROW_TILE_WORDS = ROWS * PADDED * ELEMENT_BYTES / 4;
constexpr int STAGE_WORDS = (ROWS + TILE_N) * CHUNK_WORDS + TILE_N;  // rows, centroids, h + M
constexpr int CONSUMER_WARPS = 4 * GROUPS;
constexpr int THREADS = (CONSUMER_WARPS + 4) * 32;  // and a producer warpgroup (hopper_pass.cu says why)
constexpr int PRODUCER_REGISTERS = 40;
constexpr int CONSUMER_REGISTERS = 232;
static_assert(128 * (PRODUCER_REGISTERS + GROUPS * CONSUMER_REGISTERS) <= 65536, "the register file");
// Both operands K-major without swizzle: the next 16 bytes of coordinates' core matrices sit a
// column of core matrices on, the next 8 rows' (or centroids') 128 bytes on.
constexpr unsigned A_LEADING = (ROWS / 8) * CORE_BYTES;
constexpr unsigned B_LEADING = (TILE_N / 8) * CORE_BYTES;
constexpr unsigned A_STEP = (2 * A_LEADING) >> 4;  // the next k-step's descriptor, low word
constexpr unsigned B_STEP = (2 * B_LEADING) >> 4;
constexpr unsigned GROUP_ROWS_BYTES = (64 / 8) * CORE_BYTES;  // a warpgroup's 64 rows within a chunk

static_assert(DIM % 8 == 0, "a TF32 k-step takes 8 coordinates");

#ifdef TAKE_TURNS
// The warpgroups take turns at the tensor cores, as hopper_pass.cu's do (named barrier 1 + g is
// group g's turn): group g issues a whole tile's products, passes the turn, and runs that tile's
// epilogue while the other group's products run. Measured at 1e6 x 256, k = 4,096 in fp16 without
// turns (ncu, NOTES.md): the tensor pipe 71% busy, the two epilogues side by side with it idle.
// The other group issues the same chunks one turn later, so every chunk of a tile must stay in the
// ring until then: a tile's chunks must fit its stages (else the first group would wait for stages
// the second has not read, while the second waits for its turn). hopper_pass.py asks for turns only
// where they fit. The tile's h + M is copied out of its last stage (TURN_NORMS, each group its own)
// before the epilogue, so that stage goes back to the producer as soon as its products are done.
static_assert(CHUNKS <= STAGES, "taking turns holds a whole tile in the ring");
__device__ __forceinline__ void wait_turn(int group) { asm volatile("bar.sync %0, 256;" ::"r"(1 + group) : "memory"); }
__device__ __forceinline__ void pass_turn(int group) {
    asm volatile("bar.arrive %0, 256;" ::"r"(1 + (group + 1) % GROUPS) : "memory");
}
// The group's copy of a tile's h + M (TILE_N floats, thread i of the group two of them), seen by the
// whole group before any of it is read (named barrier 1 + GROUPS + g, the group's 128 threads).
__device__ __forceinline__ const float* copy_norms(const float* stage_norms, float* turn_norms, int group) {
    float* mine = turn_norms + group * TILE_N;
    const int i = threadIdx.x % 128;
    reinterpret_cast<float2*>(mine)[i] = reinterpret_cast<const float2*>(stage_norms)[i];
    asm volatile("bar.sync %0, 128;" ::"r"(1 + GROUPS + group) : "memory");
    return mine;
}
static_assert(TILE_N == 2 * 128, "copy_norms: two floats a thread of a group");
#endif
static_assert((ROWS * KSTEP_BYTES) % 16 == 0 && (TILE_N * 4) % 16 == 0, "bulk copies move multiples of 16 bytes");

// ------------------------------------------------------------------ layouts

// Where element `at` of a tile of `height` rows (or centroids) comes from: chunk after chunk of
// CHUNK coordinates, each in the canonical layout, at = chunk (height CHUNK) + ((j (height / 8) +
// i8) 8 + r) PER_CORE + q: core matrix i8 along the rows, j along K.
__device__ __forceinline__ void chunked_place(int at, int height, int& row, int& coordinate) {
    const int chunk = at / (height * CHUNK), rest = at % (height * CHUNK);
    const int q = rest % PER_CORE, r = (rest / PER_CORE) % 8, core = rest / (8 * PER_CORE);
    row = (core % (height / 8)) * 8 + r;
    coordinate = chunk * CHUNK + PER_CORE * (core / (height / 8)) + q;
}

#if HALF
// The rows (float32, centred, n x DIM) times sigma and rounded to fp16, as row tiles of ROWS, two
// coordinates a word, zeros past n and past DIM: what the producer copies.
extern "C" __global__ void row_tiles(const float* __restrict__ x, long long n, long long tiles,
                                     unsigned* __restrict__ out, float sigma) {
    const long long total = tiles * ROW_TILE_WORDS;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        int row, coordinate;  // of the word's first element; the second is the next coordinate
        chunked_place(int(i % ROW_TILE_WORDS) * 2, ROWS, row, coordinate);
        const long long global_row = i / ROW_TILE_WORDS * ROWS + row;
        const float* from = x + global_row * DIM + coordinate;
        const bool in = global_row < n && coordinate < DIM;  // DIM is even: both or neither
        out[i] = half2_bits(in ? from[0] * sigma : 0.0f, in ? from[1] * sigma : 0.0f);
    }
}

// Tiles of TILE_N centroids the same way, each followed by its h + M (offset_half_norm).
extern "C" __global__ void centroid_tiles(const float* __restrict__ centroids, const float* __restrict__ half_norms,
                                          const float* __restrict__ bound_max, const float* __restrict__ norm_max,
                                          int k, int tiles, float* __restrict__ out, float sigma) {
    lay_out_half_centroid_tiles<TILE_N, DIM, NORMS_AT>(centroids, half_norms, bound_max, norm_max, k, tiles, out, sigma,
                                                       [](int element, int& centroid, int& coordinate) {
                                                           chunked_place(element, TILE_N, centroid, coordinate);
                                                       });
}
#else
// The rows (TF32, n x DIM) as row tiles of ROWS, zeros past n: what the producer copies.
extern "C" __global__ void row_tiles(const float* __restrict__ x_tf32, long long n, long long tiles,
                                     float* __restrict__ out) {
    const long long total = tiles * ROW_TILE_WORDS;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        int row, coordinate;
        chunked_place(int(i % ROW_TILE_WORDS), ROWS, row, coordinate);
        const long long global_row = i / ROW_TILE_WORDS * ROWS + row;
        out[i] = global_row < n ? x_tf32[global_row * DIM + coordinate] : 0.0f;
    }
}

// Tiles of TILE_N centroids the same way, each followed by its h + M (offset_half_norm).
extern "C" __global__ void centroid_tiles(const float* __restrict__ c_tf32, const float* __restrict__ half_norms,
                                          const float* __restrict__ bound_max, const float* __restrict__ norm_max,
                                          int k, int tiles, float* __restrict__ out) {
    lay_out_centroid_tiles<TILE_N, DIM>(c_tf32, half_norms, bound_max, norm_max, k, tiles, out,
                                        [](int at, int& centroid, int& coordinate) {
                                            chunked_place(at, TILE_N, centroid, coordinate);
                                        });
}
#endif

// ------------------------------------------------------------------ products

// acc (+)= A (64 rows, shared memory) x B (256 centroids, shared memory), one k-step of 8 in
// TF32 or 16 in fp16 (both K-major); each operand by its descriptor's low word (the high word, the
// stride, is DESCRIPTOR_HIGH).
#if HALF
#define MMA_64X256 "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {"
#define MMA_TAIL "a, b, p, 1, 1, 0, 0;\n}\n"
#else
#define MMA_64X256 "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {"
#define MMA_TAIL "a, b, p, 1, 1;\n}\n"
#endif
__device__ __forceinline__ void mma_64x256(float (&acc)[128], unsigned a_low, unsigned b_low, int accumulate) {
    asm volatile(
        "{\n.reg .pred p;\n.reg .b64 a, b;\nsetp.ne.b32 p, %130, 0;\n"
        "mov.b64 a, {%128, %131};\nmov.b64 b, {%129, %131};\n"
        MMA_64X256
        "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
        "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
        "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
        "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
        "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
        "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
        MMA_TAIL
        : ACCUMULATORS_32(0), ACCUMULATORS_32(32), ACCUMULATORS_32(64), ACCUMULATORS_32(96)
        : "r"(a_low), "r"(b_low), "r"(accumulate), "n"(DESCRIPTOR_HIGH));
}

// One chunk's k-steps for this warpgroup's 64 rows; the first k-step of a tile starts the sums.
template <int STEPS>
__device__ __forceinline__ void chunk_products(float (&acc)[128], const float* stage, int group, bool first) {
    const unsigned a_low = descriptor_low(shared_address(stage) + group * GROUP_ROWS_BYTES, A_LEADING);
    const unsigned b_low = descriptor_low(shared_address(stage + ROWS * CHUNK_WORDS), B_LEADING);
#pragma unroll
    for (int kk = 0; kk < STEPS; ++kk) mma_64x256(acc, a_low + A_STEP * kk, b_low + B_STEP * kk, !(first && kk == 0));
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

// After a chunk's products are issued: the chunk before it is released once its products are done.
__device__ __forceinline__ void release_before(unsigned long long* empty, int lane) {
    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
    warp_arrive(empty, lane);
}

extern "C" __global__ void __launch_bounds__(THREADS, 1) hopper_assign(HOPPER_ASSIGN_PARAMETERS(rows_tiled)) {
    extern __shared__ __align__(128) unsigned char shared[];
    unsigned long long* full = reinterpret_cast<unsigned long long*>(shared);
    unsigned long long* empty = full + STAGES;
    float* stages = reinterpret_cast<float*>(shared + 128);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long row_tiles = (n + ROWS - 1) / ROWS;
    const int rounds = int((row_tiles - blockIdx.x + gridDim.x - 1) / gridDim.x);  // row tiles b, b + grid, ...
    ring_start(full, empty, STAGES, CONSUMER_WARPS);

    if (warp >= CONSUMER_WARPS) {  // the producer: every chunk of every tile, once per row tile
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(PRODUCER_REGISTERS));
        if (warp == CONSUMER_WARPS && lane == 0) {
            long long p = 0;  // the ring's position
            for (int round = 0; round < rounds; ++round) {
                const float* rows = rows_tiled + (blockIdx.x + (long long)round * gridDim.x) * ROW_TILE_WORDS;
                for (int tile = 0; tile < tile_count; ++tile) {
                    const float* centroids = tiles + (long long)tile * TILE_WORDS;
                    for (int c = 0; c < CHUNKS; ++c, ++p) {
                        const int s = ring_claim(empty, p, STAGES);
                        const bool last = c == CHUNKS - 1;
                        const unsigned width = last ? KSTEP_BYTES * LAST_STEPS : CHUNK_WORDS * 4;  // bytes of a row
                        float* stage = stages + s * STAGE_WORDS;
                        expect_bytes(&full[s], (ROWS + TILE_N) * width + (last ? TILE_N * 4 : 0));
                        bulk_copy(stage, rows + ROWS * CHUNK_WORDS * c, ROWS * width, &full[s]);
                        bulk_copy(stage + ROWS * CHUNK_WORDS, centroids + TILE_N * CHUNK_WORDS * c, TILE_N * width,
                                  &full[s]);
                        if (last) bulk_copy(stage + (ROWS + TILE_N) * CHUNK_WORDS, centroids + NORMS_AT, TILE_N * 4, &full[s]);
                    }
                }
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(CONSUMER_REGISTERS));
    const int g = lane / 4, t = lane % 4, group = warp / 4;
    const unsigned lift = 0u - (score_offset(bound_max, norm_max) & EXPONENT) * pack_scale;  // pack()'s, tile 0
    int first = blockIdx.x * ROWS + group * 64 + (warp % 4) * 16 + g;  // this thread's rows: first and first + 8
    const int stride = gridDim.x * ROWS;
    int s = 0;              // the ring's stage of the next chunk
    unsigned phase = 0;     // and the parity of its fill
#ifdef TAKE_TURNS
    float* turn_norms = stages + STAGES * STAGE_WORDS;
    if (group == GROUPS - 1 && rounds > 0) pass_turn(group);  // the first turn is group 0's (if any)
#endif
    for (int round = 0; round < rounds; ++round, first += stride) {
        unsigned best[2][8], second[2][8];
#pragma unroll
        for (int r = 0; r < 2; ++r)
#pragma unroll
            for (int q = 0; q < 8; ++q) best[r][q] = second[r][q] = NONE;

        for (int tile = 0; tile < tile_count; ++tile) {
            float acc[128];
            pin(acc);
#ifdef TAKE_TURNS
            barrier_wait(&full[s], phase);
            wait_turn(group);
#endif
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
            int previous = s;
            for (int c = 0; c < CHUNKS - 1; ++c) {
                barrier_wait(&full[s], phase);
                chunk_products<CHUNK / PER_KSTEP>(acc, stages + s * STAGE_WORDS, group, c == 0);
                if (c > 0) release_before(&empty[previous], lane);
                previous = s;
                ring_next(s, phase, STAGES);
            }
            barrier_wait(&full[s], phase);
            chunk_products<LAST_STEPS>(acc, stages + s * STAGE_WORDS, group, CHUNKS == 1);
            if (CHUNKS > 1) release_before(&empty[previous], lane);
            const float* norms = stages + s * STAGE_WORDS + (ROWS + TILE_N) * CHUNK_WORDS;
#ifdef TAKE_TURNS
            // Unconditional: an arrive skipped on the last tile made ptxas serialize the products
            // (a divergent path among them). Group 0 takes the last group's last turn after the rows.
            pass_turn(group);
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
            pin(acc);
            // The copy overwrites what the group's last epilogue read: safe only because every
            // thread of the group passed wait_turn (all 128 sync there) since, so that wait stays
            // unconditional.
            norms = copy_norms(norms, turn_norms, group);
            warp_arrive(&empty[s], lane);
            ring_next(s, phase, STAGES);
            fold_tile<TILE_N>(acc, norms, t, lift, unsigned(tile * FOLDS), pack_scale, unscale, best, second);
#else
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
            pin(acc);
            fold_tile<TILE_N>(acc, norms, t, lift, unsigned(tile * FOLDS), pack_scale, unscale, best, second);
            warp_arrive(&empty[s], lane);
            ring_next(s, phase, STAGES);
#endif
        }

        Outcome o[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int row = first + 8 * r;
            const float norm = row < n ? x_norm[row] : 0.0f;
            o[r] = settle(best[r], second[r], norm, row < n, t, pack_bits, score_offset(bound_max, norm_max),
                          bound_max[0], bound_max[1], eps, eta, underflow, margin, candidates, columns, alpha,
                          beta, c_limit);
        }
        record_rows(o, best, first, n, t, lane, pack_bits, candidates, keep_floor, labels, flagged, limits,
                    flagged_count, floor_out, cand_rows, cand_sizes, cand_index, cand_count);
    }
#ifdef TAKE_TURNS
    if (group == 0 && rounds > 0) wait_turn(group);  // every arrive has its wait
#endif
}
