/* SPDX-License-Identifier: MIT */
/*
 * errors.c - what failed, as -errno for the code and in words for people.
 * A failed SSL call leaves its reasons in the thread's OpenSSL error
 * queue; the session keeps the last one's code and the certificate check's
 * result (a few bytes) and makes the words only when asked.
 */
#include "tls.h"

#include <openssl/err.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>

/* Reasons with an errno of their own; the rest of OpenSSL's SSL library
 * reasons are -EPROTO. */
static const struct {
	int reason;
	int err;
} reasons[] = {
	{ SSL_R_UNEXPECTED_EOF_WHILE_READING, -ECONNABORTED },
	{ SSL_R_NO_SHARED_CIPHER, -ENOPROTOOPT },
	{ SSL_R_UNSUPPORTED_PROTOCOL, -ENOPROTOOPT },
	{ SSL_R_NO_PROTOCOLS_AVAILABLE, -ENOPROTOOPT },
	{ SSL_R_NO_CIPHERS_AVAILABLE, -ENOPROTOOPT },
	{ SSL_R_TLSV1_ALERT_PROTOCOL_VERSION, -ENOPROTOOPT },
	{ SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE, -ENOPROTOOPT },
	{ SSL_R_TLSV1_ALERT_INSUFFICIENT_SECURITY, -ENOPROTOOPT },
	{ SSL_R_NO_APPLICATION_PROTOCOL, -ENOPROTOOPT },
	{ SSL_R_TLSV1_ALERT_NO_APPLICATION_PROTOCOL, -ENOPROTOOPT },
	{ SSL_R_NO_SUITABLE_SIGNATURE_ALGORITHM, -ENOPROTOOPT },
	{ SSL_R_NO_SUITABLE_KEY_SHARE, -ENOPROTOOPT },
	{ SSL_R_SSLV3_ALERT_BAD_CERTIFICATE, -EKEYREJECTED },
	{ SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE, -EKEYREJECTED },
	{ SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED, -EKEYREJECTED },
	{ SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN, -EKEYREJECTED },
	{ SSL_R_TLSV1_ALERT_UNKNOWN_CA, -EKEYREJECTED },
	{ SSL_R_TLSV1_ALERT_ACCESS_DENIED, -EKEYREJECTED },
	{ SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED, -EKEYREJECTED },
	{ SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE, -EKEYREJECTED },
	{ SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED, -EKEYEXPIRED },
};

static bool cert_expired(long verify)
{
	return verify == X509_V_ERR_CERT_HAS_EXPIRED || verify == X509_V_ERR_CERT_NOT_YET_VALID;
}

/* OpenSSL's code as -errno. */
static int errno_of(unsigned long e, long verify)
{
	int reason = ERR_GET_REASON(e);

	if (ERR_GET_LIB(e) != ERR_LIB_SSL)
		return ERR_GET_LIB(e) == ERR_LIB_X509 ? -EKEYREJECTED : -EPROTO;
	if (reason == SSL_R_CERTIFICATE_VERIFY_FAILED)
		return cert_expired(verify) ? -EKEYEXPIRED : -EKEYREJECTED;
	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
		if (reasons[i].reason == reason)
			return reasons[i].err;
	return -EPROTO;
}

void runtime__tls_failure(struct tls_failure *f, SSL *ssl, int ssl_error, int raw_end)
{
	unsigned long e = ERR_peek_last_error();

	*f = (struct tls_failure){ .ssl_err = e, .verify = SSL_get_verify_result(ssl) };
	if (ssl_error == SSL_ERROR_SSL && e)
		f->err = errno_of(e, f->verify);
	else if (raw_end < 0)
		f->err = raw_end; /* the socket's error */
	else if (raw_end > 0)
		f->err = -ECONNABORTED; /* its end, with no close_notify */
	else
		f->err = ssl_error == SSL_ERROR_SSL ? -EPROTO : -EIO;
	ERR_clear_error();
}

void runtime__tls_failure_reason(struct tls_failure *f, int reason)
{
	unsigned long e = ERR_PACK(ERR_LIB_SSL, 0, reason);

	*f = (struct tls_failure){ .err = errno_of(e, X509_V_OK), .ssl_err = e,
		                   .verify = X509_V_OK };
}

/* Words for a failure that OpenSSL did not describe. */
static const char *plain_words(const struct tls_failure *f)
{
	switch (f->err) {
	case -ECONNABORTED:
		return f->in_handshake ? "the peer closed the connection during the handshake"
		                       : "the peer closed without close_notify: the data may be cut short";
	case -ETIMEDOUT:
		return f->in_handshake ? "the handshake timed out" : "timed out";
	case -ECANCELED:
		return "cancelled";
	case -ESHUTDOWN:
		return "the runtime drains";
	default:
		return NULL;
	}
}

int runtime__tls_failure_text(const struct tls_failure *f, char *buf, size_t size)
{
	const char *words = f->ssl_err ? NULL : plain_words(f);
	int n;

	if (!f->err)
		return 0;
	if (words) {
		n = snprintf(buf, size, "%s", words);
	} else if (!f->ssl_err) {
		n = snprintf(buf, size, "%s", strerror(-f->err));
	} else if (ERR_GET_REASON(f->ssl_err) == SSL_R_CERTIFICATE_VERIFY_FAILED) {
		n = snprintf(buf, size, "certificate verify failed: %s",
		             X509_verify_cert_error_string(f->verify));
	} else {
		const char *r = ERR_reason_error_string(f->ssl_err);
		n = snprintf(buf, size, "%s", r ? r : "TLS error");
	}
	return n < 0 ? 0 : (size_t)n < size ? n : (int)size - 1;
}

/* ------------------------------------------------- contexts' failures */

static __thread char config_error[256];

void runtime__tls_config_error(const char *doing)
{
	unsigned long e = ERR_peek_last_error();
	const char *why = e ? ERR_reason_error_string(e) : NULL;

	if (doing && why)
		snprintf(config_error, sizeof(config_error), "%s: %s", doing, why);
	else
		snprintf(config_error, sizeof(config_error), "%s", doing ? doing : why ? why : "");
	ERR_clear_error();
}

void runtime__tls_config_error_clear(void)
{
	config_error[0] = '\0';
}

void runtime__tls_config_errno(const char *what, int err)
{
	snprintf(config_error, sizeof(config_error), "%s: %s", what, strerror(err));
}

int runtime_tls_error_text(char *buf, size_t size)
{
	if (!buf || !size)
		return 0;
	return snprintf(buf, size, "%s", config_error) < (int)size ? (int)strlen(buf) : (int)size - 1;
}
