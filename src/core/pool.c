/* The scratch buffer pool. */
#include "core/pool.h"

#include <stdint.h>
#include <stdlib.h>

/* Each buffer starts with a header, padded to keep the data 64-byte aligned;
 * the header remembers the class so put() needs no size. */
typedef struct {
    void *next;
    unsigned cls;
} pool_header_t;

#define HEADER_BYTES 64
#define MIN_CLASS 12 /* 4 KiB */

static unsigned size_class(size_t bytes) {
    unsigned cls = MIN_CLASS;
    while (cls < HCOMM_POOL_CLASSES - 1 && ((size_t)1 << cls) < bytes)
        cls++;
    return cls;
}

void hcomm_pool_init(hcomm_pool_t *pool, size_t budget) {
    pthread_mutex_init(&pool->lock, NULL);
    pool->budget = budget;
    pool->cached_bytes = pool->live_bytes = 0;
    for (int i = 0; i < HCOMM_POOL_CLASSES; i++)
        pool->free_list[i] = NULL;
}

void hcomm_pool_destroy(hcomm_pool_t *pool) {
    for (int i = 0; i < HCOMM_POOL_CLASSES; i++) {
        while (pool->free_list[i]) {
            pool_header_t *h = pool->free_list[i];
            pool->free_list[i] = h->next;
            free(h);
        }
    }
    pool->cached_bytes = 0;
    pthread_mutex_destroy(&pool->lock);
}

void *hcomm_pool_get(hcomm_pool_t *pool, size_t bytes) {
    if (bytes == 0 || bytes > SIZE_MAX / 2 - HEADER_BYTES) return NULL;
    unsigned cls = size_class(bytes);
    size_t class_bytes = (size_t)1 << cls;
    pool_header_t *h = NULL;
    pthread_mutex_lock(&pool->lock);
    if (pool->free_list[cls]) {
        h = pool->free_list[cls];
        pool->free_list[cls] = h->next;
        pool->cached_bytes -= class_bytes;
    }
    pool->live_bytes += class_bytes;
    pthread_mutex_unlock(&pool->lock);
    if (!h) {
        void *mem = NULL;
        if (posix_memalign(&mem, 64, HEADER_BYTES + class_bytes) != 0) {
            pthread_mutex_lock(&pool->lock);
            pool->live_bytes -= class_bytes;
            pthread_mutex_unlock(&pool->lock);
            return NULL;
        }
        h = mem;
        h->cls = cls;
    }
    return (char *)h + HEADER_BYTES;
}

void hcomm_pool_put(hcomm_pool_t *pool, void *ptr) {
    if (!ptr) return;
    pool_header_t *h = (pool_header_t *)((char *)ptr - HEADER_BYTES);
    size_t class_bytes = (size_t)1 << h->cls;
    int keep;
    pthread_mutex_lock(&pool->lock);
    pool->live_bytes -= class_bytes;
    keep = pool->cached_bytes + class_bytes <= pool->budget;
    if (keep) {
        h->next = pool->free_list[h->cls];
        pool->free_list[h->cls] = h;
        pool->cached_bytes += class_bytes;
    }
    pthread_mutex_unlock(&pool->lock);
    if (!keep) free(h);
}
