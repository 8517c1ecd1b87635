/* hcomm_gpu_surely_host: which buffers a call may take for host memory
 * without asking the CUDA driver. It must never say so of memory CUDA
 * could have mapped (anything outside the heap and the calling thread's
 * own stack); where it says nothing, the driver is asked. */
#include "core/gpu.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

/* Heap below the break, made here: malloc may not use the heap at all
 * (AddressSanitizer's maps its memory). */
static char *heap_block;

static int setup(void **state) {
    (void)state;
    heap_block = sbrk(4096);
    if (heap_block == (void *)-1) return -1;
    hcomm_gpu_find_heap(); /* as hcomm_gpu_init does where a GPU is */
    return 0;
}

static void test_heap(void **state) {
    (void)state;
    assert_true(hcomm_gpu_surely_host(heap_block));
    assert_true(hcomm_gpu_surely_host(heap_block + 4095));
    /* At and past the break nothing is known. */
    assert_false(hcomm_gpu_surely_host(sbrk(0)));
    assert_false(hcomm_gpu_surely_host((char *)sbrk(0) + 4096));
}

/* The heap's end is the break as it is now, not as it was found: memory
 * past a break that went down is no longer the heap's. */
static void test_break_moves(void **state) {
    (void)state;
    char *more = sbrk(4096);
    assert_true(more != (void *)-1);
    assert_true(hcomm_gpu_surely_host(more + 4095));
    assert_true(sbrk(-4096) != (void *)-1);
    assert_false(hcomm_gpu_surely_host(more));
    assert_false(hcomm_gpu_surely_host(more + 4095));
    assert_true(hcomm_gpu_surely_host(heap_block));
}

/* A call's buffers in the heap and on the stack need no driver call at
 * all, not even whether there is a context: with a GPU said present but
 * no driver loaded, any driver call would crash here. */
static void test_all_host(void **state) {
    (void)state;
    volatile char local[16];
    local[0] = 1;
    int was = hcomm_gpu_present;
    hcomm_gpu_present = 1;
    int both = hcomm_gpu_all_host(heap_block, (const char *)local);
    int one = hcomm_gpu_all_host(heap_block, NULL);
    int same = hcomm_gpu_all_host((const char *)local, (const char *)local);
    hcomm_gpu_present = was;
    assert_true(both && one && same);
    assert_true(hcomm_gpu_all_host(NULL, NULL)); /* no GPU: nothing asked */
}

static void test_mappings(void **state) {
    (void)state;
    /* Mapped memory is where CUDA's allocations lie: always asked. */
    size_t big = 64u << 20; /* malloc maps this size on its own */
    char *m = malloc(big);
    assert_non_null(m);
    assert_false(hcomm_gpu_surely_host(m));
    assert_false(hcomm_gpu_surely_host(m + big - 1));
    free(m);
    void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(page != MAP_FAILED);
    assert_false(hcomm_gpu_surely_host(page));
    munmap(page, 4096);
    assert_false(hcomm_gpu_surely_host(NULL));
}

static void test_own_stack(void **state) {
    (void)state;
    volatile char local[256];
    local[0] = 1;
    assert_true(hcomm_gpu_surely_host((const char *)local));
    assert_true(hcomm_gpu_surely_host((const char *)local + 255));
}

/* Another thread's stack is a mapping of its own to this thread. */
static pthread_barrier_t posted, checked;
static const char *other_local;
static int other_says;

static void *other_thread(void *arg) {
    (void)arg;
    volatile char local[64];
    local[0] = 1;
    other_local = (const char *)local;
    other_says = hcomm_gpu_surely_host(other_local);
    pthread_barrier_wait(&posted);
    pthread_barrier_wait(&checked); /* keeps the frame alive till then */
    return NULL;
}

static void test_other_stack(void **state) {
    (void)state;
    pthread_t t;
    pthread_barrier_init(&posted, NULL, 2);
    pthread_barrier_init(&checked, NULL, 2);
    assert_int_equal(pthread_create(&t, NULL, other_thread, NULL), 0);
    pthread_barrier_wait(&posted);
    int here_says = hcomm_gpu_surely_host(other_local);
    pthread_barrier_wait(&checked);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&posted);
    pthread_barrier_destroy(&checked);
    assert_true(other_says); /* its own stack, to that thread */
    assert_false(here_says);
}

/* Code on a stack of its own (a signal handler's alternate stack here,
 * as a coroutine's would be): neither that stack nor the thread's own,
 * above it in the address space or not, counts. */
static const char *thread_buf;
static volatile int alt_own = -1, alt_thread = -1;

static void on_alt_stack(int sig) {
    (void)sig;
    volatile char local[64];
    local[0] = 1;
    alt_own = hcomm_gpu_surely_host((const char *)local);
    alt_thread = hcomm_gpu_surely_host(thread_buf);
}

static void test_alternate_stack(void **state) {
    (void)state;
    volatile char local[64];
    local[0] = 1;
    thread_buf = (const char *)local;
    assert_true(hcomm_gpu_surely_host(thread_buf)); /* finds the stack */
    size_t size = 256 << 10;
    void *alt = mmap(NULL, size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(alt != MAP_FAILED);
    stack_t ss = {.ss_sp = alt, .ss_size = size}, old;
    struct sigaction sa = {.sa_handler = on_alt_stack, .sa_flags = SA_ONSTACK},
                     was;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaltstack(&ss, &old), 0);
    assert_int_equal(sigaction(SIGUSR1, &sa, &was), 0);
    raise(SIGUSR1);
    sigaction(SIGUSR1, &was, NULL);
    sigaltstack(&old, NULL);
    munmap(alt, size);
    assert_int_equal(alt_own, 0);
    assert_int_equal(alt_thread, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_heap),
        cmocka_unit_test(test_break_moves),
        cmocka_unit_test(test_all_host),
        cmocka_unit_test(test_mappings),
        cmocka_unit_test(test_own_stack),
        cmocka_unit_test(test_other_stack),
        cmocka_unit_test(test_alternate_stack),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
