/* pending_misc.c — TEMPORARY: empty case table until case_misc.c lands; deleted then. */
#include "case.h"

const tdm_case_op tdm_case_ops_misc[] = {{NULL, NULL, NULL}};
