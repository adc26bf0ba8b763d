/* The sanitizers' defaults in every program of a sanitizer or fuzzing build (the environment's
 * ASAN_OPTIONS still win). A fuzzing campaign runs under a memory limit, so ASan keeps little
 * freed memory there. clang 14's leak check follows the thread-local blocks that
 * __tls_get_addr hands out; with glibc 2.36 and LLVM's OpenMP runtime it read one block's bounds
 * as garbage and crashed at exit ("Tracer caught signal 11"), depending on the heap's layout
 * (a file name's length was enough). Without that interception it scans static TLS only. */
const char *__asan_default_options(void);

const char *__asan_default_options(void)
{
#ifdef EMBER_FUZZ_CAMPAIGN
    return "intercept_tls_get_addr=0:quarantine_size_mb=16";
#else
    return "intercept_tls_get_addr=0";
#endif
}
