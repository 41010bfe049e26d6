use std::time::Instant;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args[1].parse().unwrap();
    let threads: usize = args[2].parse().unwrap();
    let a = vec![0.5f32; n * n];
    let b = vec![0.25f32; n * n];
    let mut c = vec![0.0f32; n * n];
    let par = if threads == 1 { gemm::Parallelism::None } else { gemm::Parallelism::Rayon(threads) };
    println!("rayon threads {}", rayon::current_num_threads());
    let reps = 20;
    let t = Instant::now();
    for _ in 0..reps {
        unsafe {
            gemm::gemm(n, n, n, c.as_mut_ptr(), 1, n as isize, false, a.as_ptr(), 1, n as isize,
                b.as_ptr(), 1, n as isize, 0.0f32, 1.0f32, false, false, false, par);
        }
    }
    let s = t.elapsed().as_secs_f64() / reps as f64;
    println!("n={n} threads={threads} {:.1} GFLOP/s", 2.0 * (n as f64).powi(3) / s / 1e9);
}
