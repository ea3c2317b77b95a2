/* Run-time libraries (dynlib.h). */
#define _GNU_SOURCE
#include "core/dynlib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int dynlib_open(dynlib *lib, const char *const *names, int n)
{
    memset(lib, 0, sizeof *lib);
    for (int i = 0; i < n && names[i]; i++) {
        lib->name = names[i];
        dlerror();
        lib->handle = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib->handle) return 0;
        const char *e = dlerror();
        snprintf(lib->reason, sizeof lib->reason, "%s", e ? e : "unknown reason");
    }
    /* "a or b" names every file tried; the reason is the last one's. */
    size_t k = (size_t)snprintf(lib->why, sizeof lib->why, "cannot load ");
    for (int i = 0; i < n && names[i] && k < sizeof lib->why; i++)
        k += (size_t)snprintf(lib->why + k, sizeof lib->why - k, "%s%s", i ? " or " : "", names[i]);
    if (k < sizeof lib->why) snprintf(lib->why + k, sizeof lib->why - k, " (%.120s)", lib->reason);
    return -1;
}

int dynlib_resolve(dynlib *lib, const dynlib_sym *syms, size_t n)
{
    lib->missing = NULL;
    for (size_t i = 0; i < n; i++) {
        void *p = dlsym(lib->handle, syms[i].name);
        if (!p && syms[i].alt) p = dlsym(lib->handle, syms[i].alt);
        /* POSIX lets dlsym's void * become a function pointer; memcpy keeps -Wpedantic quiet. */
        memcpy(syms[i].slot, &p, sizeof p);
        if (!p && !syms[i].optional && !lib->missing) lib->missing = syms[i].name;
    }
    if (!lib->missing) return 0;
    snprintf(lib->why, sizeof lib->why, "%s has no %s", lib->name ? lib->name : "the library", lib->missing);
    return -1;
}

void dynlib_close(dynlib *lib)
{
    if (lib->handle) dlclose(lib->handle);
    lib->handle = NULL;
}
