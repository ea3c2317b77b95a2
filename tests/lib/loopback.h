/* The client side of the tests and benches of bertc's HTTP servers: a TCP
 * connection to 127.0.0.1. Header only, so that bench/serve/serve_load.c
 * (which links no test library) shares it. */
#ifndef BERTC_TESTS_LOOPBACK_H
#define BERTC_TESTS_LOOPBACK_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

/* A socket connected to 127.0.0.1:port, or -1. type_flags: added to
 * SOCK_STREAM (SOCK_NONBLOCK: the connection may still be in progress);
 * nodelay: TCP_NODELAY, set before connecting. */
static inline int loopback_dial(int port, int type_flags, int nodelay)
{
    int fd = socket(AF_INET, SOCK_STREAM | type_flags, 0);
    if (fd < 0) return -1;
    if (nodelay) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

#endif
