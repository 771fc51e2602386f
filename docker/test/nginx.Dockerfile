# Test stand-in for the official nginx image, built from Debian's nginx for
# `make compose-test`: the server blocks of /etc/nginx/conf.d/*.conf, logs
# on the container's output, and curl for the healthcheck, as there.
FROM debian:bookworm
RUN apt-get update \
 && apt-get install -y --no-install-recommends nginx curl \
 && rm -rf /var/lib/apt/lists/* /etc/nginx/sites-enabled/default \
 && ln -sf /dev/stdout /var/log/nginx/access.log \
 && ln -sf /dev/stderr /var/log/nginx/error.log
EXPOSE 80
CMD ["nginx", "-g", "daemon off;"]
