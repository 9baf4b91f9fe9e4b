/* `ProcessPrng`, which Rust's standard library calls on Windows for random bytes, for Wine
 * 8 (Debian 12's), whose bcryptprimitives.dll lacks it: without it a Windows test binary
 * exits at once with status 53. Built with mingw by scripts/common.sh into the tests' Wine
 * prefix; Windows itself has its own. */
#include <windows.h>
#include <ntsecapi.h>
BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG chunk = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (!RtlGenRandom(data, chunk)) return FALSE;
        data += chunk; len -= chunk;
    }
    return TRUE;
}
