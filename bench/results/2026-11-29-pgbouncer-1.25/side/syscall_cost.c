#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/epoll.h>
int main(void){ struct timespec a,b; int ep=epoll_create1(0); struct epoll_event ev[8];
 for(int k=0;k<2;k++){ clock_gettime(CLOCK_MONOTONIC,&a); for(int i=0;i<2000000;i++) syscall(SYS_getppid); clock_gettime(CLOCK_MONOTONIC,&b);
 printf("getppid %.3f us\n", ((b.tv_sec-a.tv_sec)*1e9+(b.tv_nsec-a.tv_nsec))/2e6/1000);
 clock_gettime(CLOCK_MONOTONIC,&a); for(int i=0;i<2000000;i++) epoll_wait(ep,ev,8,0); clock_gettime(CLOCK_MONOTONIC,&b);
 printf("epoll_wait(0) empty %.3f us\n", ((b.tv_sec-a.tv_sec)*1e9+(b.tv_nsec-a.tv_nsec))/2e6/1000);}
 return 0; }
