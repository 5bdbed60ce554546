//! DLPack export and import (`rgml::dlpack`): round trips keep bytes, shape,
//! strides and offset without copying; bad tensors are refused without
//! taking ownership; deleters run exactly once.

use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rgml::dlpack::{self, abi, DLDataType, DLDevice, DLManagedTensor, DLTensor, ManagedTensor};
use rgml::{Context, CpuBackend, DType, Error, Graph, TensorId};

/// Tests that count live exports run one at a time.
static EXPORTS: Mutex<()> = Mutex::new(());
fn exports_lock() -> MutexGuard<'static, ()> {
    EXPORTS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The values of `id` read by a CPU run (any layout), in logical order.
fn values(ctx: &Context, id: TensorId) -> Vec<f32> {
    let g = Graph::build(ctx, &[id]).unwrap();
    CpuBackend::new(1).unwrap().run(ctx, &g).unwrap().read_f32(ctx, id).unwrap()
}

/// The f32 values an export describes, row-major (outermost dim first).
fn dl_values_f32(m: &ManagedTensor) -> Vec<f32> {
    let t = m.dl_tensor();
    assert_eq!(t.dtype, DLDataType { code: abi::KDL_FLOAT, bits: 32, lanes: 1 });
    let (shape, strides) = (m.shape(), m.strides());
    let n: i64 = shape.iter().product();
    let mut out = Vec::new();
    for k in 0..n {
        let (mut rem, mut off) = (k, 0i64);
        for d in (0..shape.len()).rev() {
            off += (rem % shape[d]) * strides[d];
            rem /= shape[d];
        }
        // SAFETY: rgml's export describes `shape`/`strides` over live f32 data.
        let v = unsafe { *(t.data as *const u8).add(t.byte_offset as usize).cast::<f32>().offset(off as isize) };
        out.push(v);
    }
    out
}

fn matrix(ctx: &mut Context) -> TensorId {
    // 3 rows of 4: ne = [4, 3]
    ctx.new_f32(&[4, 3], &(0..12).map(|i| i as f32).collect::<Vec<_>>()).unwrap()
}

#[test]
fn exports_have_element_strides_and_offsets() {
    let _g = exports_lock();
    let mut ctx = Context::new();
    let a = matrix(&mut ctx);
    let at = ctx.transpose(a).unwrap();
    let win = ctx.view_2d(a, 2, 2, 16, 5 * 4).unwrap(); // rows 1-2, cols 1-2
                                                        // (tensor, shape, element strides, byte offset, values)
    type Case<'a> = (TensorId, &'a [i64], &'a [i64], u64, Vec<f32>);
    let cases: [Case; 3] = [
        (a, &[3, 4], &[4, 1], 0, (0..12).map(|i| i as f32).collect()),
        (at, &[4, 3], &[1, 4], 0, vec![0., 4., 8., 1., 5., 9., 2., 6., 10., 3., 7., 11.]),
        (win, &[2, 2], &[4, 1], 20, vec![5., 6., 9., 10.]),
    ];
    let base = ctx.leaf_bytes(a).unwrap().as_ptr();
    for (id, shape, strides, offset, want) in cases {
        let m = dlpack::export(&ctx, id).unwrap();
        let t = m.dl_tensor();
        assert_eq!((m.shape(), m.strides(), t.byte_offset), (shape, strides, offset), "{}", ctx.label(id));
        assert_eq!(t.data as *const u8, base, "zero copy: the leaf's own bytes");
        assert_eq!(t.device, DLDevice { device_type: abi::KDL_CPU, device_id: 0 });
        assert_eq!(dl_values_f32(&m), want);
    }
    // a 4-d permute keeps all dims; dims of one element past the last are trimmed
    let c = ctx.new_tensor(DType::F16, &[2, 3, 4, 5]).unwrap();
    let p = ctx.permute(c, [2, 0, 1, 3]).unwrap(); // ne = [3, 4, 2, 5]
    let m = dlpack::export(&ctx, p).unwrap();
    assert_eq!(m.shape(), &[5, 2, 4, 3]);
    assert_eq!(m.strides(), &[24, 1, 6, 2]);
    assert_eq!(m.dl_tensor().dtype, DLDataType { code: abi::KDL_FLOAT, bits: 16, lanes: 1 });
    let v = ctx.new_tensor(DType::I32, &[7, 1, 1]).unwrap();
    assert_eq!(dlpack::export(&ctx, v).unwrap().shape(), &[7]);
    let b = ctx.new_tensor(DType::BF16, &[2]).unwrap();
    assert_eq!(dlpack::export(&ctx, b).unwrap().dl_tensor().dtype.code, abi::KDL_BFLOAT);
}

#[test]
fn round_trip_keeps_bytes_shape_strides_offset() {
    let _g = exports_lock();
    let mut ctx = Context::new();
    let a = matrix(&mut ctx);
    let at = ctx.transpose(a).unwrap();
    let win = ctx.view_2d(a, 2, 2, 16, 5 * 4).unwrap();
    let cube = ctx.new_f32(&[2, 3, 2], &(0..12).map(|i| i as f32 * 0.5).collect::<Vec<_>>()).unwrap();
    let perm = ctx.permute(cube, [1, 2, 0, 3]).unwrap();
    let base = ctx.leaf_bytes(a).unwrap().as_ptr();
    for id in [a, at, win, perm] {
        let before = dlpack::live_exports();
        let m = dlpack::export(&ctx, id).unwrap();
        let mut other = Context::new();
        // SAFETY: a managed tensor rgml made, handed over.
        let t = unsafe { dlpack::import(&mut other, m.into_raw()) }.unwrap();
        let (l0, l1) = (ctx.layout(id).unwrap(), other.layout(t).unwrap());
        assert_eq!((l1.dtype, l1.ne), (l0.dtype, l0.ne), "{}", ctx.label(id));
        for d in (0..4).filter(|&d| l0.ne[d] > 1) {
            assert_eq!(l1.nb[d], l0.nb[d], "{}: nb[{d}]", ctx.label(id));
        }
        let t0 = ctx.tensor(id).unwrap();
        let t1 = other.tensor(t).unwrap();
        assert_eq!(t1.view_offs(), t0.view_offs(), "the offset is kept");
        let root = other.storage_root(t).unwrap();
        assert!(other.is_read_only(root));
        let root0 = ctx.storage_root(id).unwrap();
        assert_eq!(other.leaf_bytes(root).unwrap().as_ptr(), ctx.leaf_bytes(root0).unwrap().as_ptr(), "zero copy");
        if id != perm {
            assert_eq!(ctx.leaf_bytes(root0).unwrap().as_ptr(), base);
        }
        assert_eq!(values(&other, t), values(&ctx, id));
        // the export outlives its source context's handle on it; the import holds it
        assert_eq!(dlpack::live_exports(), before + 1);
        drop(other);
        assert_eq!(dlpack::live_exports(), before, "the import's drop ran the deleter");
    }
}

#[test]
fn exports_keep_their_bytes_alive_and_copy_on_write() {
    let _g = exports_lock();
    let before = dlpack::live_exports();
    let mut ctx = Context::new();
    let a = matrix(&mut ctx);
    let m = dlpack::export(&ctx, a).unwrap();
    // a write through the context goes to a fresh copy: the export keeps the old bytes
    ctx.set_data(a, &[7.0f32; 12]).unwrap();
    assert_eq!(ctx.data::<f32>(a).unwrap(), &[7.0; 12]);
    drop(ctx);
    assert_eq!(dl_values_f32(&m), (0..12).map(|i| i as f32).collect::<Vec<_>>());
    assert_eq!(dlpack::live_exports(), before + 1);
    drop(m);
    assert_eq!(dlpack::live_exports(), before);
}

#[test]
fn results_of_a_cpu_run_export_from_the_storage() {
    let _g = exports_lock();
    let before = dlpack::live_exports();
    let mut ctx = Context::new();
    let a = matrix(&mut ctx);
    let b = ctx.new_f32(&[4], &[100., 200., 300., 400.]).unwrap();
    let s = ctx.add(a, b).unwrap();
    ctx.set_output(s).unwrap();
    let st = ctx.transpose(s).unwrap();
    ctx.set_output(st).unwrap();
    let g = Graph::build(&ctx, &[s, st]).unwrap();
    let storage = CpuBackend::new(1).unwrap().run(&ctx, &g).unwrap();
    let sv = storage.read_f32(&ctx, s).unwrap();
    assert_eq!(sv[..2], [100., 201.]);
    // the storage moves into the exports; a leaf of the graph is exported from the context
    let mut all = dlpack::export_results(storage, &ctx, &[st, a, s]).unwrap();
    let (ms, ml, m) = (all.pop().unwrap(), all.pop().unwrap(), all.pop().unwrap());
    assert_eq!(ml.dl_tensor().data as *const u8, ctx.leaf_bytes(a).unwrap().as_ptr());
    assert_eq!(ms.dl_tensor().data, m.dl_tensor().data, "one storage, shared");
    drop(ms);
    assert_eq!((m.shape(), m.strides()), (&[4i64, 3][..], &[1i64, 4][..]));
    let want: Vec<f32> = (0..4).flat_map(|c| (0..3).map(move |r| (r * 4 + c) as f32 + 100. * (c + 1) as f32)).collect();
    assert_eq!(dl_values_f32(&m), want);
    // a computed tensor is not exported from the context, nor an intermediate from a run
    let e = dlpack::export(&ctx, s).unwrap_err();
    assert!(e.to_string().contains("export_results"), "{e}");
    drop((m, ml));
    assert_eq!(dlpack::live_exports(), before);
    let mid = ctx.scale(s, 2.0).unwrap();
    let out = ctx.sum(mid).unwrap();
    let g = Graph::build(&ctx, &[out]).unwrap();
    let storage = CpuBackend::new(1).unwrap().run(&ctx, &g).unwrap();
    let e = dlpack::export_results(storage, &ctx, &[out, mid]).unwrap_err();
    assert!(e.to_string().contains("mark it as an output"), "{e}");
    assert_eq!(dlpack::live_exports(), before, "the exports made before the error are deleted");
}

#[test]
fn block_types_are_refused() {
    let mut ctx = Context::new();
    for d in [DType::Q8_0, DType::Q4_K] {
        let q = ctx.new_tensor(d, &[256, 2]).unwrap();
        let e = dlpack::export(&ctx, q).unwrap_err();
        assert!(matches!(e, Error::Invalid(_)) && e.to_string().contains("not whole elements"), "{e}");
    }
    let mut empty = Context::new_no_alloc();
    let x = empty.new_tensor(DType::F32, &[3]).unwrap();
    assert!(matches!(dlpack::export(&empty, x), Err(Error::NoData(_))));
}

/// A hand-made managed tensor over its own f32 buffer, counting deleter calls
/// (`managed` first: its address is the block's).
#[repr(C)]
struct Foreign {
    managed: DLManagedTensor,
    shape: Vec<i64>,
    strides: Vec<i64>,
    _data: Vec<f32>,
    deleted: Arc<AtomicUsize>,
}

unsafe extern "C" fn foreign_deleter(m: *mut DLManagedTensor) {
    // SAFETY: `manager_ctx` is the `Box<Foreign>` leaked by `foreign`.
    let f = unsafe { Box::from_raw((*m).manager_ctx.cast::<Foreign>()) };
    f.deleted.fetch_add(1, Ordering::SeqCst);
}

/// `data` seen as `shape`/`strides` (None: null strides) at `byte_offset`.
fn foreign(
    data: Vec<f32>,
    shape: &[i64],
    strides: Option<&[i64]>,
    byte_offset: u64,
) -> (*mut DLManagedTensor, Arc<AtomicUsize>) {
    let deleted = Arc::new(AtomicUsize::new(0));
    let mut f = Box::new(Foreign {
        managed: DLManagedTensor {
            dl_tensor: DLTensor {
                data: std::ptr::null_mut(),
                device: DLDevice { device_type: abi::KDL_CPU, device_id: 0 },
                ndim: shape.len() as i32,
                dtype: DLDataType { code: abi::KDL_FLOAT, bits: 32, lanes: 1 },
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(foreign_deleter),
        },
        shape: shape.to_vec(),
        strides: strides.map(<[i64]>::to_vec).unwrap_or_default(),
        _data: data,
        deleted: deleted.clone(),
    });
    f.managed.dl_tensor.data = if f._data.is_empty() { std::ptr::null_mut() } else { f._data.as_mut_ptr().cast() };
    f.managed.dl_tensor.shape = f.shape.as_mut_ptr();
    if strides.is_some() {
        f.managed.dl_tensor.strides = f.strides.as_mut_ptr();
    }
    let raw = Box::into_raw(f);
    // SAFETY: just leaked, valid.
    unsafe { (*raw).managed.manager_ctx = raw.cast::<c_void>() };
    (raw.cast::<DLManagedTensor>(), deleted)
}

/// Imports `m`, expecting a refusal mentioning `why`; the deleter must not have run.
fn refused(m: *mut DLManagedTensor, deleted: &AtomicUsize, why: &str) {
    let mut ctx = Context::new();
    // SAFETY: `m` is a valid managed tensor from `foreign` (possibly edited).
    let e = unsafe { dlpack::import(&mut ctx, m) }.unwrap_err();
    assert!(matches!(e, Error::Invalid(_)) && e.to_string().contains(why), "{e} (expected {why:?})");
    drop(ctx);
    assert_eq!(deleted.load(Ordering::SeqCst), 0, "a refused import keeps no ownership");
    // SAFETY: still ours after the refusal: released once here.
    unsafe { ((*m).deleter.unwrap())(m) };
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
}

#[test]
fn bad_imports_are_refused() {
    let (m, d) = foreign(vec![0.; 6], &[2, 3], Some(&[3, -1]), 8);
    refused(m, &d, "negative stride");
    let (m, d) = foreign(vec![0.; 32], &[2, 1, 2, 2, 2], None, 0);
    refused(m, &d, "at most 4 dims");
    let (m, d) = foreign(vec![0.; 4], &[4], None, 0);
    // SAFETY: `m` is live and ours.
    unsafe { (*m).dl_tensor.dtype = DLDataType { code: 9, bits: 32, lanes: 1 } };
    refused(m, &d, "no rgml type");
    let (m, d) = foreign(vec![0.; 4], &[4], None, 0);
    // SAFETY: as above.
    unsafe { (*m).dl_tensor.dtype = DLDataType { code: abi::KDL_UINT, bits: 8, lanes: 1 } };
    refused(m, &d, "no rgml type");
    let (m, d) = foreign(vec![], &[2, 2], None, 0);
    refused(m, &d, "null data");
    let (m, d) = foreign(vec![0.; 4], &[4], None, 0);
    // SAFETY: as above.
    unsafe { (*m).dl_tensor.device = DLDevice { device_type: abi::KDL_CUDA, device_id: 1 } };
    refused(m, &d, "only CPU memory");
    let (m, d) = foreign(vec![0.; 4], &[3], None, 2);
    refused(m, &d, "not aligned");
    let (m, d) = foreign(vec![0.; 4], &[-1], None, 0);
    refused(m, &d, "negative size");
    let (m, d) = foreign(vec![0.; 4], &[1 << 40, 1 << 40], Some(&[1 << 40, 1]), 0);
    refused(m, &d, "overflow");
    let (m, d) = foreign(vec![0.; 4], &[4], None, 0);
    // SAFETY: as above.
    unsafe { (*m).dl_tensor.ndim = -1 };
    refused(m, &d, "negative ndim");
    let mut ctx = Context::new();
    // SAFETY: null is allowed and refused.
    assert!(unsafe { dlpack::import(&mut ctx, std::ptr::null_mut()) }.is_err());
}

/// Imports `m` into `ctx` (must succeed).
fn import_ok(ctx: &mut Context, m: *mut DLManagedTensor) -> TensorId {
    // SAFETY: `m` is a valid managed tensor from `foreign`, handed over.
    unsafe { dlpack::import(ctx, m) }.unwrap()
}

#[test]
fn deleter_runs_exactly_once() {
    let (m, d) = foreign((0..6).map(|i| i as f32).collect(), &[2, 3], None, 0);
    let mut ctx = Context::new();
    let t = import_ok(&mut ctx, m);
    assert_eq!(values(&ctx, t), [0., 1., 2., 3., 4., 5.]);
    assert_eq!(d.load(Ordering::SeqCst), 0);
    drop(ctx);
    assert_eq!(d.load(Ordering::SeqCst), 1);
    // dropped by a truncation
    let mut ctx = Context::new();
    let mark = ctx.mark();
    let (m, d) = foreign(vec![1.; 4], &[4], None, 0);
    import_ok(&mut ctx, m);
    ctx.truncate(&mark).unwrap();
    assert_eq!(d.load(Ordering::SeqCst), 1);
    drop(ctx);
    assert_eq!(d.load(Ordering::SeqCst), 1);
}

#[test]
fn imports_at_the_edges() {
    // null strides: compact row-major; the leaf takes the shape
    let (m, _) = foreign((0..24).map(|i| i as f32).collect(), &[2, 3, 4], None, 0);
    let mut ctx = Context::new();
    let t = import_ok(&mut ctx, m);
    assert_eq!(ctx.layout(t).unwrap().ne, [4, 3, 2, 1]);
    assert_eq!(ctx.layout(t).unwrap().nb, [4, 16, 48, 96]);
    assert!(ctx.tensor(t).unwrap().op().is_leaf());
    // an offset is kept as the view's offset
    let (m, _) = foreign((0..8).map(|i| i as f32).collect(), &[2, 3], Some(&[3, 1]), 8);
    let t = import_ok(&mut ctx, m);
    assert_eq!(ctx.tensor(t).unwrap().view_offs(), 8);
    assert_eq!(values(&ctx, t), [2., 3., 4., 5., 6., 7.]);
    // transposed (column-major) and stepped
    let (m, _) = foreign((0..6).map(|i| i as f32).collect(), &[3, 2], Some(&[1, 3]), 0);
    let t = import_ok(&mut ctx, m);
    assert_eq!(ctx.layout(t).unwrap().nb[..2], [12, 4]);
    assert_eq!(values(&ctx, t), [0., 3., 1., 4., 2., 5.]);
    let (m, _) = foreign((0..12).map(|i| i as f32).collect(), &[2, 3], Some(&[6, 2]), 0);
    let t = import_ok(&mut ctx, m);
    assert_eq!(values(&ctx, t), [0., 2., 4., 6., 8., 10.]);
    // stride 0: a broadcast, read-only
    let (m, _) = foreign(vec![1., 2., 3.], &[4, 3], Some(&[0, 1]), 0);
    let t = import_ok(&mut ctx, m);
    assert_eq!(values(&ctx, t), [1., 2., 3., 1., 2., 3., 1., 2., 3., 1., 2., 3.]);
    let one = ctx.new_f32(&[1], &[1.]).unwrap();
    assert!(ctx.add_inplace(t, one).is_err(), "no writes into imported memory");
    let root = ctx.storage_root(t).unwrap();
    assert!(matches!(ctx.set_data(root, &[0f32; 3]), Err(Error::ReadOnly(_))));
    // zero-size dims, null data
    let (m, _) = foreign(vec![], &[0, 3], None, 0);
    let t = import_ok(&mut ctx, m);
    assert_eq!(ctx.layout(t).unwrap().ne, [3, 0, 1, 1]);
    assert_eq!(ctx.layout(t).unwrap().nbytes(), 0);
    assert_eq!(values(&ctx, t), Vec::<f32>::new());
    let (m, _) = foreign(vec![], &[2, 0], Some(&[0, 0]), 4);
    let t = import_ok(&mut ctx, m);
    assert_eq!(values(&ctx, t), Vec::<f32>::new());
    // 0-d, and more than 4 dims with leading ones folded
    let (m, _) = foreign(vec![42.], &[], None, 0);
    let t = import_ok(&mut ctx, m);
    assert_eq!((ctx.layout(t).unwrap().ne, values(&ctx, t)), ([1, 1, 1, 1], vec![42.]));
    let (m, _) = foreign((0..16).map(|i| i as f32).collect(), &[1, 1, 2, 2, 2, 2], None, 0);
    let t = import_ok(&mut ctx, m);
    assert_eq!(ctx.layout(t).unwrap().ne, [2, 2, 2, 2]);
    // a size-1 dim's stride addresses nothing: any value, even negative, is accepted
    let (m, _) = foreign(vec![5., 6.], &[1, 2], Some(&[-7, 1]), 0);
    let t = import_ok(&mut ctx, m);
    assert_eq!(values(&ctx, t), [5., 6.]);
}

#[test]
fn versioned_exports_and_imports() {
    let _g = exports_lock();
    let before = dlpack::live_exports();
    let mut ctx = Context::new();
    let a = matrix(&mut ctx);
    let win = ctx.view_2d(a, 2, 2, 16, 5 * 4).unwrap();
    let v = dlpack::export(&ctx, win).unwrap().into_versioned();
    let h = v.header();
    assert_eq!(h.version, dlpack::DLPackVersion { major: 1, minor: 0 });
    assert_eq!(h.flags & abi::DLPACK_FLAG_BITMASK_READ_ONLY, abi::DLPACK_FLAG_BITMASK_READ_ONLY);
    assert_eq!((v.shape(), v.strides(), v.dl_tensor().byte_offset), (&[2i64, 2][..], &[4i64, 1][..], 20));
    assert_eq!(dlpack::live_exports(), before + 1, "one export, wrapped");
    let mut other = Context::new();
    // SAFETY: a versioned managed tensor rgml made, handed over.
    let t = unsafe { dlpack::import_versioned(&mut other, v.into_raw()) }.unwrap();
    assert_eq!(other.tensor(t).unwrap().view_offs(), 20);
    assert_eq!(values(&other, t), [5., 6., 9., 10.]);
    drop(other);
    assert_eq!(dlpack::live_exports(), before, "the versioned deleter deletes the export inside");
    // another major version is refused, and stays the caller's
    let v = dlpack::export(&ctx, a).unwrap().into_versioned();
    // SAFETY: `v` owns the live header; only its version is changed.
    unsafe { (*v.as_ptr()).version.major = 2 };
    // SAFETY: a valid versioned managed tensor (of an unknown major version).
    let e = unsafe { dlpack::import_versioned(&mut ctx, v.as_ptr()) }.unwrap_err();
    assert!(e.to_string().contains("version 2.0"), "{e}");
    assert_eq!(dlpack::live_exports(), before + 1);
    // a refused tensor's checks also leave it to the caller
    // SAFETY: as above.
    unsafe {
        (*v.as_ptr()).version.major = 1;
        (*v.as_ptr()).dl_tensor.device.device_type = abi::KDL_CUDA;
    }
    // SAFETY: as above.
    assert!(unsafe { dlpack::import_versioned(&mut ctx, v.as_ptr()) }.is_err());
    drop(v);
    assert_eq!(dlpack::live_exports(), before);
    refused_after_accepted(&mut ctx);
}

/// A refused legacy import after an accepted one leaves the accepted one alone.
fn refused_after_accepted(ctx: &mut Context) {
    let (m, d) = foreign(vec![1., 2.], &[2], None, 0);
    let t = import_ok(ctx, m);
    let (bad, bad_d) = foreign(vec![1., 2.], &[2], Some(&[-1]), 0);
    refused(bad, &bad_d, "negative stride");
    assert_eq!(values(ctx, t), [1., 2.]);
    assert_eq!(d.load(Ordering::SeqCst), 0);
}
