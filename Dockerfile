# mailproof in one image for every role (`MAILPROOF_ROLE` picks what a container runs); see
# compose.yaml and README.md, "Running on several machines".

FROM rust:1-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends pkg-config libssl-dev libwebkit2gtk-4.1-dev libgtk-3-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release -p mailproof -p webkit --bin mailproof --bin mailproof-webkit-helper

FROM debian:bookworm-slim
# The run-time part of scripts/setup.sh's package list: the engines and their display, the fonts
# layouts depend on, the spam filters. policy-rc.d keeps the packages' own daemons from starting:
# mailproof starts spamd and rspamd itself.
RUN printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d \
 && apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates openssl \
      chromium firefox-esr webkit2gtk-driver libwebkit2gtk-4.1-0 xvfb xauth \
      fonts-liberation2 fonts-crosextra-carlito fonts-crosextra-caladea fonts-dejavu-core \
      fonts-noto-color-emoji fonts-noto-cjk fontconfig \
      spamassassin spamd rspamd tini \
 && rm -rf /var/lib/apt/lists/* /usr/sbin/policy-rc.d \
 && useradd --system --uid 10001 --create-home --home-dir /var/lib/mailproof mailproof
COPY --from=build /src/target/release/mailproof /src/target/release/mailproof-webkit-helper /usr/local/bin/
# Only the data files, every one that `serve` reads (tests/it/roles.rs starts each role from what
# these lines copy; .dockerignore keeps keys, databases and screenshots out of the context):
# keys are mounted at run time, readable by uid 10001 (README.md, "Running on several machines").
COPY data/clients.toml data/spam-filters.toml data/sender-requirements.toml data/behaviours.toml data/analytics-matrix.toml data/inbox-rows.toml /usr/share/mailproof/
COPY data/rules/ /usr/share/mailproof/rules/
COPY data/fonts/ /usr/share/mailproof/fonts/
USER mailproof
WORKDIR /var/lib/mailproof
ENV MAILPROOF_RESOURCES=/usr/share/mailproof \
    MAILPROOF_DATA_DIR=/var/lib/mailproof/data \
    MAILPROOF_HTTP=0.0.0.0:8080 \
    MAILPROOF_SMTP=0.0.0.0:2525
EXPOSE 8080 2525
# tini as PID 1 reaps the engines' orphaned helper processes (Chromium's zombies otherwise pile
# up) and passes SIGTERM on; compose.yaml's `init: true` does the same where the image is run
# without this entrypoint.
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/mailproof"]
CMD ["serve"]
