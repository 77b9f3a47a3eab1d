/* pending_linalg.c — TEMPORARY: empty case table until case_linalg.c lands; deleted then. */
#include "case.h"

const tdm_case_op tdm_case_ops_linalg[] = {{NULL, NULL, NULL}};
