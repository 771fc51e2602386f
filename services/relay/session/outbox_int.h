/*
 * Internals of the WebSocket outbound queue, shared by outbox.c and its
 * unit test; everyone else uses session.h.
 */
#ifndef COMB_OUTBOX_INT_H
#define COMB_OUTBOX_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "session.h"

struct frame {
	struct frame *next;
	int opcode;
	size_t len;
	char data[];
};

struct ws_outbox {
	pthread_mutex_t mu;
	pthread_cond_t work;   /* the writer waits for frames */
	pthread_cond_t room;   /* pushers and drain wait for progress */
	struct ws_transport transport;
	struct ws_outbox_limits limits;
	struct frame *head, *tail;
	size_t queued;         /* bytes, including the frame being written */
	bool closing;          /* no more pushes */
	bool close_sent;
	bool failed;
	bool stopping;
	bool writing;          /* a frame is being written (by the writer
	                          thread or a pusher), outside mu */
	bool thread_running;
	bool thread_started;
	pthread_t thread;
};

#endif
