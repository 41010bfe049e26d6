/* <fenv.h> for compiling CORE-MATH (the core-math-sys crate) to WebAssembly
 * (scripts/wasm-build.sh puts this folder before wasi-libc's headers).
 * WebAssembly has one rounding mode, round to nearest, and no floating-point
 * exception flags, so the functions CORE-MATH calls have nothing to do:
 * fegetround() is FE_TONEAREST and raising or testing a flag does nothing.
 * wasi-libc's own fenv.h defines none of the FE_* names CORE-MATH uses.
 */
#ifndef MLPL_WASM_FENV_H
#define MLPL_WASM_FENV_H
#define FE_INEXACT 0x20
#define FE_UNDERFLOW 0x10
#define FE_OVERFLOW 0x08
#define FE_DIVBYZERO 0x04
#define FE_INVALID 0x01
#define FE_ALL_EXCEPT 0x3d
#define FE_TONEAREST 0
#define FE_DOWNWARD 0x400
#define FE_UPWARD 0x800
#define FE_TOWARDZERO 0xc00
typedef unsigned short fexcept_t;
typedef struct { unsigned int __cw; } fenv_t;
static inline int feraiseexcept(int e) { (void)e; return 0; }
static inline int feclearexcept(int e) { (void)e; return 0; }
static inline int fetestexcept(int e) { (void)e; return 0; }
static inline int fegetround(void) { return FE_TONEAREST; }
static inline int fesetround(int r) { return r == FE_TONEAREST ? 0 : -1; }
static inline int fegetexceptflag(fexcept_t *f, int e) { (void)e; *f = 0; return 0; }
static inline int fesetexceptflag(const fexcept_t *f, int e) { (void)f; (void)e; return 0; }
static inline int fegetenv(fenv_t *env) { env->__cw = 0; return 0; }
static inline int fesetenv(const fenv_t *env) { (void)env; return 0; }
static inline int feholdexcept(fenv_t *env) { env->__cw = 0; return 0; }
static inline int feupdateenv(const fenv_t *env) { (void)env; return 0; }
#endif
