/* Ordinary device buffers mapped by the peers, so that a large CUDA IPC
 * call on them goes direct as on registered memory (ipc_mem.c): every rank
 * reads and writes the others' buffers in place, with no copy through the
 * workspaces.
 *
 * A rank offers the allocation holding a call's buffer (a card: CUDA's id
 * for it and an IPC handle) with the call's agreement; each peer maps it
 * once and keeps it until the communicator is freed or its owner retires
 * it. A mapping can fail (CUDA refuses some memory), and all ranks must
 * take the same path, so a card goes direct only once its owner has seen
 * every peer report it mapped: in the tail of each later agreement, a
 * rank reports, per peer, the highest offer number of that peer's it has
 * mapped. The owner then marks the card confirmed, and every rank sees
 * that in the owner's next card. A buffer thus goes direct from the
 * second call after the one that first offered it. A peer that cannot map a
 * card says so, and its owner offers no more.
 *
 * CUDA leaves undefined an allocation freed while a peer maps it; UCX's
 * IPC cache lives with the same. An owner that finds an offer freed (a new
 * allocation at its start, or, with its table full, CUDA knowing its id no
 * more) retires it: the peers unmap it when they read that.
 *
 * The tables are plain C (CUDA is reached through ops) so that
 * test/unit/test_ipc_cards can run them without a GPU. */
#ifndef HCOMM_CUDA_IPC_CARDS_H
#define HCOMM_CUDA_IPC_CARDS_H

#include "shm_tp/shm.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define HCOMM_IPC_CARDS 32 /* offers a rank holds, so mappings per peer */
#define HCOMM_IPC_CARD_RANKS HCOMM_SHM_DEVTAIL_RANKS
/* Smaller allocations may share CUDA's block with others, which one IPC
 * handle would map together. */
#define HCOMM_IPC_CARD_MIN_ALLOC ((size_t)2 << 20)

typedef struct {
    /* The allocation holding p: 0, or -1 if none. */
    int (*range)(void *ctx, const void *p, uint64_t *id, uintptr_t *base,
                 size_t *bytes);
    int (*export_handle)(void *ctx, uintptr_t base, unsigned char handle[64]);
    int (*map)(void *ctx, const unsigned char handle[64], char **mapped);
    void (*unmap)(void *ctx, char *mapped);
    void *ctx;
} hcomm_ipc_card_ops_t;

typedef struct {
    uint64_t id, bytes;
    uintptr_t base;
    uint32_t gen;
    enum { OFFER_FREE, OFFER_MADE, OFFER_CONFIRMED, OFFER_RETIRING } state;
    unsigned char handle[64];
} hcomm_ipc_offer_t;

typedef struct {
    uint64_t id, bytes;
    char *mapped;
} hcomm_ipc_mapping_t;

typedef struct {
    pthread_mutex_t lock; /* a call's start and an earlier one's launch */
    int rank, size;
    hcomm_ipc_card_ops_t ops;
    /* This rank's offers, and what the peers reported of them. */
    hcomm_ipc_offer_t offer[HCOMM_IPC_CARDS];
    uint32_t gens;
    uint32_t acked[HCOMM_IPC_CARD_RANKS];
    int refused;  /* a peer could not map one: offer no more */
    int retiring; /* offers to announce as retired */
    /* allocations CUDA would not export (the latest few), not asked again */
    uint64_t unexportable[4];
    /* The peers' offers mapped here, and what to report of them. */
    hcomm_ipc_mapping_t map[HCOMM_IPC_CARD_RANKS][HCOMM_IPC_CARDS];
    uint32_t mapped[HCOMM_IPC_CARD_RANKS];
    uint64_t unmappable;
    int report; /* mapped or unmappable changed since the last tail */
} hcomm_ipc_cards_t;

hcomm_ipc_cards_t *hcomm_ipc_cards_new(int rank, int size,
                                       const hcomm_ipc_card_ops_t *ops);
/* Unmaps every peer's offer (once no kernel can read them). */
void hcomm_ipc_cards_free(hcomm_ipc_cards_t *t);

/* This rank's part of a call's agreement: a card for each of its buffers
 * that want one (in, out: NULL for none; len bytes each), and the tail's
 * reports. head->has_tail says whether the tail is sent. */
void hcomm_ipc_cards_publish(hcomm_ipc_cards_t *t, const void *in,
                             size_t in_len, const void *out, size_t out_len,
                             hcomm_shm_devreg_t *head,
                             hcomm_shm_devtail_t *tail);
/* Takes in every rank's part of an agreement, in call order: unmaps what
 * was retired, maps new offers, counts the reports on this rank's own. */
void hcomm_ipc_cards_learn(hcomm_ipc_cards_t *t, const hcomm_shm_devreg_t *head,
                           const hcomm_shm_devtail_t *tail);
/* Where peer's confirmed card maps [card->off, card->off + len) here, or
 * NULL if it does not. */
char *hcomm_ipc_cards_peer(hcomm_ipc_cards_t *t, int peer,
                           const hcomm_shm_devcard_t *card, size_t len);

#endif
