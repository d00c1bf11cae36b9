# zkit in a container: a ZooKeeper-compatible server on 2181, data in the /data volume.
#   docker build -t zkit .
#   docker run -p 2181:2181 -p 8081:8081 -v zkit-data:/data zkit
# Any other zkit command: docker run --rm zkit ls / --server HOST:2181

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p zkit-cli \
 && strip target/release/zkit

FROM debian:bookworm-slim
RUN groupadd --system --gid 1000 zkit \
 && useradd --system --uid 1000 --gid zkit --home-dir /data --shell /usr/sbin/nologin zkit \
 && mkdir -p /data /etc/zkit \
 && chown zkit:zkit /data
COPY --from=build /src/target/release/zkit /usr/local/bin/zkit
COPY packaging/zoo.cfg /etc/zkit/zoo.cfg
# Inside the container, listen on every interface (the sample keeps loopback for hosts).
RUN sed -i 's/^clientPortAddress=.*/clientPortAddress=0.0.0.0/; s/^admin.serverAddress=.*/admin.serverAddress=0.0.0.0/' /etc/zkit/zoo.cfg
USER zkit
VOLUME ["/data"]
EXPOSE 2181 8081
ENTRYPOINT ["zkit"]
CMD ["serve", "--config", "/etc/zkit/zoo.cfg", "--data-dir", "/data"]
