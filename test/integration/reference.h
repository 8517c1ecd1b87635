/* Reference results for the integration tests: the integer-valued inputs
 * each rank contributes and the exact result of reducing them, computed
 * here independently of the library (wrapping integer arithmetic, fp16
 * through the compiler's _Float16). */
#ifndef HCOMM_TEST_REFERENCE_H
#define HCOMM_TEST_REFERENCE_H

#include "hcomm.h"

#include <stdint.h>

/* The input of rank r at index i for (t, op): small integers, chosen so that
 * int8 and uint8 sums and products wrap and float results stay exact. */
int64_t ref_input(hcomm_dtype_t t, hcomm_op_t op, int r, size_t i);
/* Writes value v (f for float types) as element i of a t buffer. */
void ref_store(hcomm_dtype_t t, void *buf, size_t i, double f, int64_t v);
/* Fills buf[0..count) with rank r's inputs. */
void ref_fill(hcomm_dtype_t t, hcomm_op_t op, int r, void *buf, size_t count);
/* The reduction over ranks 0..n-1 of the inputs at index i, into buf[i]
 * (input indices shifted by base: element i holds global index base + i). */
void ref_expect(hcomm_dtype_t t, hcomm_op_t op, int n, size_t base, size_t i,
                void *buf);

extern const char *ref_dtype_names[HCOMM_DTYPE_COUNT];
extern const char *ref_op_names[HCOMM_OP_COUNT];

#endif
