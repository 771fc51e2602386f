// Errors of the relay and of the network, with the relay's exact message.

/**
 * An error from the relay or the network. message is the relay's exact
 * message for refused writes (`conflict: artifact head changed`) and
 * queries (`restricted: ...`, `incremental_busy`); code is its prefix
 * (`conflict`, `invalid`, `restricted`, `auth-required`, `rate-limited`,
 * `error`, `incremental_reset`, ...) or `network` when no answer came.
 */
export class CombError extends Error {
	constructor(message, fields = {}) {
		super(message, fields.cause ? { cause: fields.cause } : undefined);
		this.name = 'CombError';
		this.code = fields.code ?? message.split(':')[0];
		this.status = fields.status ?? 0;
		if (fields.retryAfter !== undefined)
			this.retryAfter = fields.retryAfter;
		if (fields.event !== undefined)
			this.event = fields.event;
		if (fields.head !== undefined)
			this.head = fields.head;
	}
}

/** A CombError for an HTTP answer other than success. */
export function errorFromAnswer(status, text, headers, message) {
	let body = null;
	try {
		body = JSON.parse(text);
	} catch {
		// plain text
	}
	const msg = message ?? body?.error ?? (text || `HTTP ${status}`);
	const retry = headers?.get?.('retry-after');
	return new CombError(msg, {
		status,
		retryAfter: retry ? Number(retry) : undefined,
	});
}
