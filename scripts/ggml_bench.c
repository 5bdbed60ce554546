// Times ggml's CPU backend on the shapes of `rgml bench` (models/src/workloads.rs),
// for scripts/compare_ggml.py. It contains no ggml code: it links the libggml that
// llama-cpp-python installs, and uses only its public API (ggml.h, ggml-cpu.h).
//
//   cc -O2 -I$SITE/include ggml_bench.c -L$SITE/llama_cpp/lib -lggml -lggml-base -lggml-cpu
//     -Wl,-rpath,$SITE/llama_cpp/lib -o ggml_bench
//   ./ggml_bench N THREADS REPS [TYPES [ROWS]] (one JSON object per workload on stdout)
//
// With TYPES (comma-separated ggml type names: q5_1,q6_K,...) only the products
// of those weight types with ROWS activation rows (default 1) are timed, as
// `rgml bench --types ... --act-rows ROWS`.
//
// Each workload is one graph, computed through a persistent ggml threadpool as
// llama.cpp computes (ggml_graph_plan + ggml_graph_compute), once untimed and then
// REPS times; the median seconds is reported. The repetition counts follow rgml's:
// REPS for the memory-bound ones, min(REPS, 5) for the products, max(REPS, 50) for
// the chain of 1000 adds (timed with 1 and 2 threads).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml.h"
#include "ggml-cpu.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp_double(const void * a, const void * b) {
    double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}

// rgml's `filled`: ((i * 2654435761) ^ seed) % 1000 / 500 - 1
static void fill(float * v, int64_t n, uint32_t seed) {
    for (int64_t i = 0; i < n; i++) {
        v[i] = (float) (((uint32_t) i * 2654435761u ^ seed) % 1000) / 500.0f - 1.0f;
    }
}

static struct ggml_tensor * filled(struct ggml_context * ctx, int64_t ne0, int64_t ne1, uint32_t seed) {
    struct ggml_tensor * t = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, ne0, ne1);
    fill((float *) t->data, ne0 * ne1, seed);
    return t;
}

// k x m weights of `type`: filled f32 values (seed 3), quantized once.
static struct ggml_tensor * weights(struct ggml_context * ctx, enum ggml_type type, int64_t m, int64_t k) {
    if (type == GGML_TYPE_F32) {
        return filled(ctx, k, m, 3);
    }
    float * v = malloc(sizeof(float) * k * m);
    fill(v, k * m, 3);
    struct ggml_tensor * w = ggml_new_tensor_2d(ctx, type, k, m);
    ggml_quantize_chunk(type, v, w->data, 0, m, k, NULL);
    free(v);
    return w;
}

static double median_run(struct ggml_cgraph * gf, struct ggml_threadpool * tp, int threads, int reps) {
    struct ggml_cplan plan = ggml_graph_plan(gf, threads, tp);
    void * work = plan.work_size ? malloc(plan.work_size) : NULL;
    plan.work_data = work;
    ggml_graph_compute(gf, &plan);
    double * t = malloc(sizeof(double) * reps);
    for (int r = 0; r < reps; r++) {
        double s = now();
        ggml_graph_compute(gf, &plan);
        t[r] = now() - s;
    }
    qsort(t, reps, sizeof(double), cmp_double);
    double m = t[reps / 2];
    free(t);
    free(work);
    return m;
}

enum kind { W1, W2A, W2B, W3, W7, MATMUL, CHAIN };

struct workload {
    const char * name;
    enum kind kind;
    enum ggml_type type;
    int64_t n_act;
    int threads; // 0: the command line's
};

static struct ggml_tensor * build(struct ggml_context * ctx, const struct workload * w, int64_t n) {
    switch (w->kind) {
    case W1: return ggml_cont(ctx, ggml_transpose(ctx, filled(ctx, n, n, 1)));
    case W2A: return ggml_add(ctx, filled(ctx, n, n, 1), filled(ctx, n, n, 2));
    case W2B: return ggml_add(ctx, filled(ctx, n, n, 1), filled(ctx, n, 1, 2));
    case W3: {
        struct ggml_tensor * a = filled(ctx, n, n, 1);
        struct ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n, n);
        for (int64_t i = 0; i < n * n; i++) ((float *) b->data)[i] = 1.0f;
        return ggml_mul_inplace(ctx, a, b);
    }
    case W7: return ggml_cpy(ctx, filled(ctx, n, n, 1), ggml_new_tensor_2d(ctx, GGML_TYPE_F16, n, n));
    case MATMUL: return ggml_mul_mat(ctx, weights(ctx, w->type, n, n), filled(ctx, n, w->n_act, 4));
    case CHAIN: {
        struct ggml_tensor * t = filled(ctx, 16, 1, 1);
        struct ggml_tensor * one = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 16);
        for (int i = 0; i < 16; i++) ((float *) one->data)[i] = 1.0f;
        for (int i = 0; i < 1000; i++) t = ggml_add(ctx, t, one);
        return t;
    }
    }
    return NULL;
}

// The ggml type named `name`, or GGML_TYPE_COUNT.
static enum ggml_type type_named(const char * name, size_t len) {
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        const char * tn = ggml_type_name((enum ggml_type) t);
        if (tn && strlen(tn) == len && strncmp(tn, name, len) == 0) {
            return (enum ggml_type) t;
        }
    }
    return GGML_TYPE_COUNT;
}

static int run_all(const struct workload * all, size_t n_all, int64_t n, int threads, int reps);

int main(int argc, char ** argv) {
    if (argc < 4 || argc > 6) {
        fprintf(stderr, "usage: ggml_bench N THREADS REPS [TYPES [ROWS]]\n");
        return 2;
    }
    const int64_t n = atoll(argv[1]);
    const int threads = atoi(argv[2]), reps = atoi(argv[3]);
    if (n <= 0 || n % 256 != 0 || threads <= 0 || reps <= 0) {
        fprintf(stderr, "ggml_bench: N must be a positive multiple of 256, THREADS and REPS positive\n");
        return 2;
    }
    ggml_cpu_init();
    if (argc >= 5) {
        const int64_t rows = argc == 6 ? atoll(argv[5]) : 1;
        if (rows <= 0) {
            fprintf(stderr, "ggml_bench: ROWS must be positive\n");
            return 2;
        }
        static struct workload mv[GGML_TYPE_COUNT];
        static char names[GGML_TYPE_COUNT][48];
        size_t n_mv = 0;
        for (const char * p = argv[4]; *p && n_mv < GGML_TYPE_COUNT;) {
            size_t len = strcspn(p, ",");
            enum ggml_type t = type_named(p, len);
            if (t == GGML_TYPE_COUNT) {
                fprintf(stderr, "ggml_bench: unknown type %.*s\n", (int) len, p);
                return 2;
            }
            snprintf(names[n_mv], sizeof names[n_mv], "W5-%s-n%lld", ggml_type_name(t), (long long) rows);
            mv[n_mv] = (struct workload) {names[n_mv], MATMUL, t, rows, 0};
            n_mv++;
            p += len + (p[len] == ',');
        }
        return run_all(mv, n_mv, n, threads, reps);
    }
    const struct workload all[] = {
        {"W1", W1}, {"W2a", W2A}, {"W2b", W2B}, {"W3", W3}, {"W7", W7},
        {"W4-n1", MATMUL, GGML_TYPE_F32, 1}, {"W4-n16", MATMUL, GGML_TYPE_F32, 16},
        {"W4-n128", MATMUL, GGML_TYPE_F32, 128}, {"W4-n512", MATMUL, GGML_TYPE_F32, 512},
        {"W5-q4_0-n1", MATMUL, GGML_TYPE_Q4_0, 1}, {"W5-q4_0-n128", MATMUL, GGML_TYPE_Q4_0, 128},
        {"W5-q8_0-n1", MATMUL, GGML_TYPE_Q8_0, 1}, {"W5-q8_0-n128", MATMUL, GGML_TYPE_Q8_0, 128},
        {"W5-q4_K-n1", MATMUL, GGML_TYPE_Q4_K, 1},
        {"W6-t1", CHAIN, GGML_TYPE_F32, 0, 1}, {"W6-t2", CHAIN, GGML_TYPE_F32, 0, 2},
    };
    return run_all(all, sizeof(all) / sizeof(all[0]), n, threads, reps);
}

static int run_all(const struct workload * all, size_t n_all, int64_t n, int threads, int reps) {
    for (size_t i = 0; i < n_all; i++) {
        const struct workload * w = &all[i];
        const int t = w->threads ? w->threads : threads;
        const int r = w->kind == MATMUL ? (reps < 5 ? reps : 5) : w->kind == CHAIN ? (reps > 50 ? reps : 50) : reps;
        // inputs, output and graph: four n x n f32 matrices and slack
        struct ggml_init_params ip = {(size_t) n * n * 4 * 4 + (64u << 20), NULL, false};
        struct ggml_context * ctx = ggml_init(ip);
        if (!ctx) {
            fprintf(stderr, "ggml_bench: ggml_init failed\n");
            return 1;
        }
        struct ggml_cgraph * gf = ggml_new_graph_custom(ctx, 2048, false);
        ggml_build_forward_expand(gf, build(ctx, w, n));
        struct ggml_threadpool_params tpp = ggml_threadpool_params_default(t);
        struct ggml_threadpool * tp = ggml_threadpool_new(&tpp);
        const double s = median_run(gf, tp, t, r);
        ggml_threadpool_free(tp);
        printf("{\"name\": \"%s\", \"threads\": %d, \"median_s\": %.9g, \"nodes\": %d}\n", w->name, t, s,
               ggml_graph_n_nodes(gf));
        fflush(stdout);
        ggml_free(ctx);
    }
    return 0;
}
