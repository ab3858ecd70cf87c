// Batched UDP I/O: sendmmsg/recvmmsg need _GNU_SOURCE, which Swift's Glibc module does not set.
#ifndef CMS_NET_H
#define CMS_NET_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>
#endif
