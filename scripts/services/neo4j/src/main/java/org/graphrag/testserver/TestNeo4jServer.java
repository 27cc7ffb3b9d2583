package org.graphrag.testserver;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import org.neo4j.configuration.GraphDatabaseInternalSettings;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.connectors.BoltConnectorInternalSettings;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;

/**
 * A throwaway Neo4j 5.26 DBMS for tests and CI: the embedded kernel with a Bolt connector.
 *
 * <p>Usage: {@code TestNeo4jServer <home-dir> <bolt-port> [page-cache-MiB]}. Listens on 127.0.0.1 only,
 * without authentication or encryption (never use it for real data). Prints {@code READY bolt://...}
 * once the Bolt handshake succeeds; SIGTERM shuts the DBMS down cleanly.
 */
public final class TestNeo4jServer {
    private static final String HOST = "127.0.0.1";
    private static final long MIB = 1024L * 1024L;
    private static final int HANDSHAKE_TIMEOUT_MS = 2_000;
    // Bolt waits 5 s for its threads and again for its connections by default: too slow for a test run.
    private static final Duration BOLT_SHUTDOWN_WAIT = Duration.ofMillis(200);
    // Bolt magic preamble, then four proposed versions: 5.8 down to 5.0, 4.4 (the server picks one).
    private static final byte[] HANDSHAKE = {
        0x60, 0x60, (byte) 0xB0, 0x17,
        0, 8, 8, 5,
        0, 0, 4, 4,
        0, 0, 0, 0,
        0, 0, 0, 0,
    };

    private TestNeo4jServer() {}

    public static void main(String[] args) throws Exception {
        if (args.length < 2 || args.length > 3) {
            System.err.println("usage: TestNeo4jServer <home-dir> <bolt-port> [page-cache-MiB]");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        int port = Integer.parseInt(args[1]);
        long pageCacheMiB = args.length == 3 ? Long.parseLong(args[2]) : 64L;

        DatabaseManagementService dbms = build(home, port, pageCacheMiB);
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            System.out.println("STOPPING");
            dbms.shutdown();
            stopped.countDown();
        }, "neo4j-shutdown"));

        if (!boltAnswers(port)) {
            System.err.println("Bolt connector on " + HOST + ":" + port + " did not answer the handshake");
            System.exit(1);
        }
        System.out.println("READY bolt://" + HOST + ":" + port);
        System.out.flush();
        stopped.await();
    }

    private static DatabaseManagementService build(Path home, int port, long pageCacheMiB) {
        return new DatabaseManagementServiceBuilder(home)
                .setConfig(BoltConnector.enabled, true)
                .setConfig(BoltConnector.listen_address, new SocketAddress(HOST, port))
                .setConfig(BoltConnector.advertised_address, new SocketAddress(HOST, port))
                .setConfig(BoltConnector.encryption_level, BoltConnector.EncryptionLevel.DISABLED)
                .setConfig(BoltConnectorInternalSettings.thread_pool_shutdown_wait_time, BOLT_SHUTDOWN_WAIT)
                .setConfig(BoltConnectorInternalSettings.connection_shutdown_wait_time, BOLT_SHUTDOWN_WAIT)
                .setConfig(GraphDatabaseSettings.auth_enabled, false)
                .setConfig(GraphDatabaseSettings.pagecache_memory, pageCacheMiB * MIB)
                // Test data is thrown away: keep transaction logs small and do not preallocate them.
                .setConfig(GraphDatabaseSettings.keep_logical_logs, "false")
                .setConfig(GraphDatabaseSettings.preallocate_logical_logs, false)
                .setConfig(GraphDatabaseSettings.udc_enabled, false)
                // Neo4j reads are read-committed: a query running while a commit is being applied can see
                // part of it. Snapshot queries re-run such a query, so a reader sees a write whole or not at
                // all (the GraphStore port's rule). Other servers need internal.dbms.query.snapshot=true too.
                .setConfig(GraphDatabaseInternalSettings.snapshot_query, true)
                .build();
    }

    /** Whether the port completes a Bolt handshake (the server agrees on a protocol version). */
    private static boolean boltAnswers(int port) throws InterruptedException {
        for (int attempt = 0; attempt < 100; attempt++) {
            try (Socket socket = new Socket()) {
                socket.connect(new InetSocketAddress(HOST, port), HANDSHAKE_TIMEOUT_MS);
                socket.setSoTimeout(HANDSHAKE_TIMEOUT_MS);
                OutputStream out = socket.getOutputStream();
                out.write(HANDSHAKE);
                out.flush();
                int agreed = new DataInputStream(socket.getInputStream()).readInt();
                if (agreed != 0) {
                    return true;
                }
            } catch (IOException notYet) {
                // The connector may still be binding: try again shortly.
            }
            Thread.sleep(100);
        }
        return false;
    }
}
