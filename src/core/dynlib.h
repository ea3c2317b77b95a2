/* Libraries bertc opens at run time (oneDNN, NCCL, NVML, the CUDA module).
 *
 * None of them is linked: the binary has to start where they are missing,
 * and each loader decides what their absence means. What they share is
 * here: try a list of names, resolve a table of symbols, and say which
 * library lacks which symbol. The messages users read stay each loader's
 * own; the parts they are built from (the name that failed, dlerror's
 * text, the missing symbol) come from this helper. */
#ifndef BERTC_CORE_DYNLIB_H
#define BERTC_CORE_DYNLIB_H

#include <stddef.h>

/* One entry of a symbol table: the address goes into *(void (**)(void))slot,
 * i.e. slot points at a function pointer of any type. */
typedef struct {
    void *slot;
    const char *name;
    const char *alt;  /* tried when name is missing (an older name), or NULL */
    int optional;     /* 1: a missing one leaves the pointer NULL */
} dynlib_sym;

typedef struct {
    void *handle;        /* NULL until dynlib_open succeeds */
    const char *name;    /* the name that loaded, or the last one tried */
    char reason[256];    /* after a failed open: dlerror's text, the file name still in it */
    const char *missing; /* after a failed resolve: the first required symbol not found */
    char why[320];       /* after a failure: "cannot load A or B (reason)" or "A has no SYM" */
} dynlib;

/* Opens the first of names[0..n) that loads (RTLD_NOW | RTLD_LOCAL). 0, or
 * -1 with reason and why filled; lib is zeroed first. */
int dynlib_open(dynlib *lib, const char *const *names, int n);
/* Fills every slot of syms[0..n) (NULL for a missing optional one). 0, or -1
 * with missing and why set; the slots are left as found. */
int dynlib_resolve(dynlib *lib, const dynlib_sym *syms, size_t n);
/* Closes the handle (if any); the library's code must no longer run. */
void dynlib_close(dynlib *lib);

#endif
