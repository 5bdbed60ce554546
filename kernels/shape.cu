// concat and repeat, as src/backend/cpu/shape.rs: exact element copies
// (operands of one plain type; `size` bytes per element).
// Compiled with prelude.cuh prepended.

__device__ __forceinline__ void rg_copy_elem(char* d, const char* s, int size) {
    if (size == 4) *(unsigned int*)d = *(const unsigned int*)s;
    else if (size == 2) *(unsigned short*)d = *(const unsigned short*)s;
    else for (int k = 0; k < size; k++) d[k] = s[k];
}

// dst = a and b joined along `dim`: index i_dim < a.ne[dim] reads a, the rest b at i_dim - a.ne[dim].
extern "C" __global__ void rg_concat(int dim, int size, char* dst, RgT d, const char* a, RgT ta, const char* b, RgT tb, i64 n) {
    RG_GRID_STRIDE(i, n) {
        i64 idx[4];
        i64 r = i;
        idx[0] = r % d.ne[0]; r /= d.ne[0];
        idx[1] = r % d.ne[1]; r /= d.ne[1];
        idx[2] = r % d.ne[2];
        idx[3] = r / d.ne[2];
        char* pd = dst + idx[0] * d.nb[0] + idx[1] * d.nb[1] + idx[2] * d.nb[2] + idx[3] * d.nb[3];
        const char* ps;
        if (idx[dim] < ta.ne[dim]) {
            ps = a + idx[0] * ta.nb[0] + idx[1] * ta.nb[1] + idx[2] * ta.nb[2] + idx[3] * ta.nb[3];
        } else {
            idx[dim] -= ta.ne[dim];
            ps = b + idx[0] * tb.nb[0] + idx[1] * tb.nb[1] + idx[2] * tb.nb[2] + idx[3] * tb.nb[3];
        }
        rg_copy_elem(pd, ps, size);
    }
}

// dst = a tiled: dst[i0, i1, i2, i3] = a[i0 % a.ne0, i1 % a.ne1, i2 % a.ne2, i3 % a.ne3].
extern "C" __global__ void rg_repeat(int size, char* dst, RgT d, const char* a, RgT ta, i64 n) {
    RG_GRID_STRIDE(i, n) {
        i64 r = i;
        i64 i0 = r % d.ne[0]; r /= d.ne[0];
        i64 i1 = r % d.ne[1]; r /= d.ne[1];
        i64 i2 = r % d.ne[2];
        i64 i3 = r / d.ne[2];
        const char* ps = a + (i0 % ta.ne[0]) * ta.nb[0] + (i1 % ta.ne[1]) * ta.nb[1] + (i2 % ta.ne[2]) * ta.nb[2]
                         + (i3 % ta.ne[3]) * ta.nb[3];
        rg_copy_elem(dst + i0 * d.nb[0] + i1 * d.nb[1] + i2 * d.nb[2] + i3 * d.nb[3], ps, size);
    }
}
