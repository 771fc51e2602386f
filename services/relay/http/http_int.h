/* The routes answered inside http/ (nip11.c, health.c); each sends exactly
 * one answer. */
#ifndef COMB_HTTP_INT_H
#define COMB_HTTP_INT_H

#include "request/request.h"

void handle_nip11(struct request *req);
void handle_healthz(struct request *req);
void handle_readyz(struct request *req);
void handle_metrics(struct request *req);

#endif
