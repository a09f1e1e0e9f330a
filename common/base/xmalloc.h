/* Allocators that abort on out-of-memory, so callers need no NULL checks. */
#ifndef ROVE_XMALLOC_H
#define ROVE_XMALLOC_H

#include <stddef.h>

void *xmalloc(size_t);
void *xcalloc(size_t, size_t);
void *xrealloc(void *, size_t);
char *xstrdup(const char *);
char *xstrndup(const char *, size_t);
int xasprintf(char **, const char *, ...) __attribute__((format(printf, 2, 3)));

#endif
