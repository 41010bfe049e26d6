//! The benchmarks allocate as `mlpl` does for tensor data: blocks of a page
//! or more start on a cache line (`LineAligned`; `mlpl` wraps mimalloc, the
//! benchmarks the system allocator).

#[global_allocator]
static GLOBAL: mlpl_devices::cpu::LineAligned<std::alloc::System> =
    mlpl_devices::cpu::LineAligned(std::alloc::System);
