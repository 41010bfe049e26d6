use mlpl_devices::*;
use std::time::Instant;
fn t(name: &str, mut f: impl FnMut()) {
    f();
    let s = Instant::now();
    for _ in 0..20 { f(); }
    println!("{name}: {:.3} ms", s.elapsed().as_secs_f64() * 1e3 / 20.0);
}
fn main() {
    let b = CpuBackend::new();
    let x = Tensor::full(vec![4096, 1024], 0.5);
    let r = Tensor::full(vec![1024], 0.5);
    let c = Tensor::full(vec![4096, 1], 0.5);
    let ids = Tensor::from_vec(vec![4096], (0..4096).map(|i| (i % 1000) as f32).collect());
    t("add same 4M", || { b.binary(BinaryOp::Add, &x, &x).unwrap(); });
    t("add row 4M", || { b.binary(BinaryOp::Add, &x, &r).unwrap(); });
    t("add col 4M", || { b.binary(BinaryOp::Add, &x, &c).unwrap(); });
    t("gelu 4M", || { b.unary(UnaryOp::Gelu, &x).unwrap(); });
    t("softmax last 4M", || { b.softmax(&x, 1).unwrap(); });
    t("softmax axis0 4M", || { b.softmax(&x, 0).unwrap(); });
    t("xent 4096x1024", || { b.cross_entropy(&x, &ids, true).unwrap(); });
    t("sum axis0", || { b.reduce(ReduceOp::Sum, &x, Some(0)).unwrap(); });
    t("sum axis1", || { b.reduce(ReduceOp::Sum, &x, Some(1)).unwrap(); });
    t("transpose", || { b.permute(&x, &[1, 0]).unwrap(); });
    t("sum_to_shape row", || { b.sum_to_shape(&x, &[1024]).unwrap(); });
    t("layernorm", || { b.layer_norm(&x, 1e-5).unwrap(); });
    t("scatter", || { b.scatter_add_rows(&ids, &x, 1000).unwrap(); });
    let mut p = x.clone(); let mut m = x.clone(); let mut v = x.clone();
    t("adam 4M", || { b.adam_update(&mut p, &x, &mut m, &mut v, 1e-3, 0.9, 0.999, 1e-8, 0.1, 0.01, 0.0).unwrap(); });
}
