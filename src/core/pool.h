/* Scratch buffers for plans, kept for reuse up to a byte budget
 * (HCOMM_BUFFER_POOL_SIZE): allocations come in power-of-two classes, freed
 * buffers go back to their class while the cached total stays within the
 * budget, and are released to the system otherwise. Thread safe. */
#ifndef HCOMM_CORE_POOL_H
#define HCOMM_CORE_POOL_H

#include <pthread.h>
#include <stddef.h>

#define HCOMM_POOL_CLASSES 48

typedef struct hcomm_pool {
    pthread_mutex_t lock;
    size_t budget;       /* most bytes cached */
    size_t cached_bytes; /* bytes sitting in the free lists */
    size_t live_bytes;   /* bytes handed out */
    void *free_list[HCOMM_POOL_CLASSES];
} hcomm_pool_t;

void hcomm_pool_init(hcomm_pool_t *pool, size_t budget);
void hcomm_pool_destroy(hcomm_pool_t *pool);
/* 64-byte aligned; NULL when out of memory. bytes == 0 gives NULL too. */
void *hcomm_pool_get(hcomm_pool_t *pool, size_t bytes);
void hcomm_pool_put(hcomm_pool_t *pool, void *ptr);

#endif
