/* See tpc_test_http.h. */
#include "tpc_test_http.h"

#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int tpc_test_http_get(int port, const char *path, char *body, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    char req[4096];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    if (n <= 0 || (size_t)n >= sizeof req || write(fd, req, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    size_t len = 0, rcap = 1 << 16;
    char *resp = malloc(rcap);
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 10000) <= 0)
            break;
        if (len + 4096 > rcap)
            resp = realloc(resp, rcap *= 2);
        ssize_t r = read(fd, resp + len, rcap - len - 1);
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    resp[len] = 0;
    int status = -1;
    const char *sep = strstr(resp, "\r\n\r\n");
    if (sscanf(resp, "HTTP/%*d.%*d %d", &status) != 1 || !sep)
        status = -1;
    if (cap) {
        snprintf(body, cap, "%s", sep ? sep + 4 : "");
    }
    free(resp);
    return status;
}

char *tpc_test_url_encode(const char *s, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (; *s && o + 4 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~') {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = 0;
    return out;
}
