/* pending_pointwise.c — TEMPORARY: empty case table until case_pointwise.c lands; deleted then. */
#include "case.h"

const tdm_case_op tdm_case_ops_pointwise[] = {{NULL, NULL, NULL}};
