/* Ordinary device buffers mapped by the peers: the offers, the mappings
 * and the reports that confirm them (ipc_cards.h says why so). */
#include "cuda_ipc/ipc_cards.h"

#include <stdlib.h>
#include <string.h>

hcomm_ipc_cards_t *hcomm_ipc_cards_new(int rank, int size,
                                       const hcomm_ipc_card_ops_t *ops) {
    if (size > HCOMM_IPC_CARD_RANKS) return NULL;
    hcomm_ipc_cards_t *t = calloc(1, sizeof(*t));
    if (!t) return NULL;
    pthread_mutex_init(&t->lock, NULL);
    t->rank = rank;
    t->size = size;
    t->ops = *ops;
    return t;
}

void hcomm_ipc_cards_free(hcomm_ipc_cards_t *t) {
    if (!t) return;
    for (int p = 0; p < t->size; p++)
        for (int i = 0; i < HCOMM_IPC_CARDS; i++)
            if (t->map[p][i].mapped)
                t->ops.unmap(t->ops.ctx, t->map[p][i].mapped);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

/* Made or confirmed: the peers may map it. */
static int standing(const hcomm_ipc_offer_t *o) {
    return o->state == OFFER_MADE || o->state == OFFER_CONFIRMED;
}

/* Its id goes to the peers with the next tail, which frees its slot. */
static void retire(hcomm_ipc_cards_t *t, hcomm_ipc_offer_t *o) {
    o->state = OFFER_RETIRING;
    t->retiring++;
}

static hcomm_ipc_offer_t *offer_of(hcomm_ipc_cards_t *t, uint64_t id) {
    for (int i = 0; i < HCOMM_IPC_CARDS; i++)
        if (standing(&t->offer[i]) && t->offer[i].id == id) return &t->offer[i];
    return NULL;
}

static hcomm_ipc_offer_t *free_offer(hcomm_ipc_cards_t *t) {
    for (int i = 0; i < HCOMM_IPC_CARDS; i++)
        if (t->offer[i].state == OFFER_FREE) return &t->offer[i];
    return NULL;
}

/* Whether CUDA still has allocation id at base. */
static int alive(hcomm_ipc_cards_t *t, const hcomm_ipc_offer_t *o) {
    uint64_t id = 0;
    uintptr_t base = 0;
    size_t bytes = 0;
    return t->ops.range(t->ops.ctx, (const void *)o->base, &id, &base,
                        &bytes) == 0 &&
           id == o->id;
}

/* The offer of the allocation holding [p, p + len), made if need be; NULL
 * where the buffer cannot be offered. */
static hcomm_ipc_offer_t *offer(hcomm_ipc_cards_t *t, const void *p, size_t len,
                                uint64_t *off) {
    uint64_t id;
    uintptr_t base;
    size_t bytes;
    if (t->ops.range(t->ops.ctx, p, &id, &base, &bytes) ||
        bytes < HCOMM_IPC_CARD_MIN_ALLOC || (uintptr_t)p - base > bytes ||
        len > bytes - ((uintptr_t)p - base))
        return NULL;
    *off = (uintptr_t)p - base;
    hcomm_ipc_offer_t *o = offer_of(t, id);
    if (o || t->refused) return o;
    for (int i = 0; i < 4; i++)
        if (t->unexportable[i] == id) return NULL;
    /* An offer at the same start is an allocation since freed; so, when
     * the table is full, is any whose id CUDA no longer knows. */
    for (int i = 0; i < HCOMM_IPC_CARDS; i++)
        if (standing(&t->offer[i]) && t->offer[i].base == base)
            retire(t, &t->offer[i]);
    if (!(o = free_offer(t)))
        for (int i = 0; i < HCOMM_IPC_CARDS; i++)
            if (standing(&t->offer[i]) && !alive(t, &t->offer[i]))
                retire(t, &t->offer[i]);
    /* A retired offer's slot is free once the peers have been told. */
    if (!o) return NULL;
    if (t->ops.export_handle(t->ops.ctx, base, o->handle)) {
        memmove(t->unexportable + 1, t->unexportable,
                sizeof(t->unexportable) - sizeof(t->unexportable[0]));
        t->unexportable[0] = id;
        return NULL;
    }
    o->id = id;
    o->base = base;
    o->bytes = bytes;
    o->gen = ++t->gens;
    o->state = t->size == 1 ? OFFER_CONFIRMED : OFFER_MADE;
    return o;
}

static void card(hcomm_ipc_cards_t *t, const void *p, size_t len,
                 hcomm_shm_devcard_t *c) {
    memset(c, 0, sizeof(*c));
    uint64_t off = 0;
    const hcomm_ipc_offer_t *o = p ? offer(t, p, len, &off) : NULL;
    if (!o) return;
    c->id = o->id;
    c->off = off;
    c->bytes = o->bytes;
    c->gen = o->gen;
    c->confirmed = o->state == OFFER_CONFIRMED;
    memcpy(c->handle, o->handle, sizeof(c->handle));
}

void hcomm_ipc_cards_publish(hcomm_ipc_cards_t *t, const void *in,
                             size_t in_len, const void *out, size_t out_len,
                             hcomm_shm_devreg_t *head,
                             hcomm_shm_devtail_t *tail) {
    pthread_mutex_lock(&t->lock);
    if (!in && !out && !t->retiring && !t->report) { /* most calls */
        head->has_tail = 0;
        pthread_mutex_unlock(&t->lock);
        return;
    }
    card(t, in, in_len, &tail->card[0]);
    card(t, out, out_len, &tail->card[1]);
    int retired = 0;
    memset(tail->retired, 0, sizeof(tail->retired));
    for (int i = 0; i < HCOMM_IPC_CARDS && retired < HCOMM_SHM_DEVTAIL_RETIRED;
         i++)
        if (t->offer[i].state == OFFER_RETIRING) {
            tail->retired[retired++] = t->offer[i].id;
            t->offer[i].state = OFFER_FREE;
            t->retiring--;
        }
    head->has_tail =
        tail->card[0].id || tail->card[1].id || retired || t->report;
    if (head->has_tail) {
        memcpy(tail->mapped, t->mapped, sizeof(tail->mapped));
        tail->unmappable = t->unmappable;
        t->report = 0;
    }
    pthread_mutex_unlock(&t->lock);
}

static hcomm_ipc_mapping_t *mapping_of(hcomm_ipc_cards_t *t, int peer,
                                       uint64_t id) {
    for (int i = 0; i < HCOMM_IPC_CARDS; i++)
        if (t->map[peer][i].mapped && t->map[peer][i].id == id)
            return &t->map[peer][i];
    return NULL;
}

static void map_card(hcomm_ipc_cards_t *t, int peer,
                     const hcomm_shm_devcard_t *c) {
    if (!c->id || mapping_of(t, peer, c->id) || (t->unmappable >> peer & 1))
        return;
    hcomm_ipc_mapping_t *m = NULL;
    for (int i = 0; i < HCOMM_IPC_CARDS && !m; i++)
        if (!t->map[peer][i].mapped) m = &t->map[peer][i];
    char *mapped = NULL;
    /* The owner holds at most HCOMM_IPC_CARDS offers, and its retirements
     * arrive before its new offers: a full table is a peer's error. */
    if (m && t->ops.map(t->ops.ctx, c->handle, &mapped) == 0 && mapped) {
        m->id = c->id;
        m->bytes = c->bytes;
        m->mapped = mapped;
        if (c->gen > t->mapped[peer]) t->mapped[peer] = c->gen;
    } else {
        t->unmappable |= (uint64_t)1 << peer;
    }
    t->report = 1;
}

void hcomm_ipc_cards_learn(hcomm_ipc_cards_t *t, const hcomm_shm_devreg_t *head,
                           const hcomm_shm_devtail_t *tail) {
    pthread_mutex_lock(&t->lock);
    uint32_t least = UINT32_MAX; /* the offers every peer has mapped */
    for (int p = 0; p < t->size; p++) {
        if (p == t->rank) continue;
        if (head[p].has_tail) {
            const hcomm_shm_devtail_t *d = &tail[p];
            for (int i = 0; i < HCOMM_SHM_DEVTAIL_RETIRED; i++) {
                hcomm_ipc_mapping_t *m =
                    d->retired[i] ? mapping_of(t, p, d->retired[i]) : NULL;
                if (!m) continue;
                t->ops.unmap(t->ops.ctx, m->mapped);
                memset(m, 0, sizeof(*m));
            }
            if (d->mapped[t->rank] > t->acked[p])
                t->acked[p] = d->mapped[t->rank];
            if (d->unmappable >> t->rank & 1) t->refused = 1;
            map_card(t, p, &d->card[0]);
            map_card(t, p, &d->card[1]);
        }
        if (t->acked[p] < least) least = t->acked[p];
    }
    for (int i = 0; i < HCOMM_IPC_CARDS; i++)
        if (t->offer[i].state == OFFER_MADE && t->offer[i].gen <= least)
            t->offer[i].state = OFFER_CONFIRMED;
    pthread_mutex_unlock(&t->lock);
}

char *hcomm_ipc_cards_peer(hcomm_ipc_cards_t *t, int peer,
                           const hcomm_shm_devcard_t *card, size_t len) {
    pthread_mutex_lock(&t->lock);
    const hcomm_ipc_mapping_t *m = mapping_of(t, peer, card->id);
    char *at = m && card->off <= m->bytes && len <= m->bytes - card->off
                   ? m->mapped + card->off
                   : NULL;
    pthread_mutex_unlock(&t->lock);
    return at;
}
