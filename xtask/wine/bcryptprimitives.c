/* A stand-in for Windows' bcryptprimitives.dll, for running tests under Wine 8 only (never
 * shipped): Wine 8 lacks the DLL, and Rust's std asks it for randomness (`ProcessPrng`) at
 * start, so every Rust program there exits with status 53 and prints nothing. `cargo xtask
 * windows` builds this with mingw and copies it into the test prefix's system32. */
#include <windows.h>

/* RtlGenRandom, exported by advapi32 under this name. */
BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        ULONG chunk = length > 0x40000000 ? 0x40000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
