import Foundation
import Glibc
import RunnerTestSupport

/// nginx, from Debian's package, serving a few files over HTTPS on loopback: on `port` with a
/// server certificate only, on `clientCertificatePort` also requiring a client certificate signed
/// by a given CA. It runs in the foreground as a single process (no master, no workers) that this
/// test started, in a folder of its own, and is stopped by its pid: `stop()`, or when the value
/// goes away.
///
/// Its access log tells what each request presented: `accessLog()` lines read
/// "PORT CLIENT-VERIFY "CLIENT-SUBJECT" STATUS URI CONNECTION PROTOCOL", for example
/// `41234 SUCCESS "CN=runner test client" 200 /entries/1.json 7 HTTP/1.1` (`NONE` without a
/// client certificate, `FAILED:reason` for one nginx refused). A third port speaks HTTP/2.
final class TLSServer: @unchecked Sendable {
    let folder: String
    let port: UInt16
    let clientCertificatePort: UInt16
    /// A third port speaking HTTP/2 (ALPN h2) with the server certificate only.
    let http2Port: UInt16
    private let process: ChildProcess

    /// Starts nginx with `certificate` (the server's, with its key), trusting `clientCA` for client
    /// certificates on the second port, serving `files` (path under the root: content). Picks free
    /// loopback ports, and tries others when one was taken meanwhile.
    init(certificate: TestCA.Issued, clientCA: String, files: [String: String]) async throws {
        guard let nginx = ["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"].first(where: FileManager.default.isExecutableFile)
        else {
            throw SystemTool.Missing(name: "nginx")
        }
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("runner-nginx-\(UUID().uuidString)").path
        let root = "\(folder)/www"
        for (path, content) in files {
            let file = URL(fileURLWithPath: "\(root)/\(path)")
            try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try content.write(to: file, atomically: true, encoding: .utf8)
        }
        var lastError = ""
        for _ in 1...5 {
            let ports = try LoopbackPort.unused(3)
            let configuration = Self.configuration(
                folder: folder, root: root, ports: ports, certificate: certificate, clientCA: clientCA)
            try configuration.write(toFile: "\(folder)/nginx.conf", atomically: true, encoding: .utf8)
            try? FileManager.default.removeItem(atPath: "\(folder)/error.log")
            let log = "\(folder)/stdout.log"
            let process = try ChildProcess(
                nginx, ["-p", folder, "-e", "\(folder)/error.log", "-c", "\(folder)/nginx.conf"], stdout: .file(log), stderr: .file(log))
            if await Self.waitUntilListening(process, ports: ports) {
                self.process = process
                port = ports[0]
                clientCertificatePort = ports[1]
                http2Port = ports[2]
                return
            }
            Self.end(process)
            lastError = (try? String(contentsOfFile: "\(folder)/error.log", encoding: .utf8)) ?? ""
            lastError += (try? String(contentsOfFile: "\(folder)/stdout.log", encoding: .utf8)) ?? ""
            guard lastError.contains("Address already in use") else { break }
        }
        try? FileManager.default.removeItem(atPath: folder)
        throw Failed(description: "nginx did not start: \(lastError)")
    }

    deinit {
        stop()
    }

    /// Ends nginx and removes its folder. Idempotent.
    func stop() {
        Self.end(process)
        try? FileManager.default.removeItem(atPath: folder)
    }

    /// The access log's lines so far.
    func accessLog() -> [String] {
        let text = (try? String(contentsOfFile: "\(folder)/access.log", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").map(String.init)
    }

    /// The error log, to explain a failure.
    func errorLog() -> String {
        (try? String(contentsOfFile: "\(folder)/error.log", encoding: .utf8)) ?? ""
    }

    // MARK: - Starting and stopping

    private static func configuration(
        folder: String, root: String, ports: [UInt16], certificate: TestCA.Issued, clientCA: String
    ) -> String {
        """
        daemon off;
        master_process off;
        pid \(folder)/nginx.pid;
        error_log \(folder)/error.log info;
        events { worker_connections 64; }
        http {
            log_format tls '$server_port $ssl_client_verify "$ssl_client_s_dn" $status $request_uri $connection $server_protocol';
            access_log \(folder)/access.log tls;
            types { application/json json; }
            default_type application/octet-stream;
            client_body_temp_path \(folder)/body;
            proxy_temp_path \(folder)/proxy;
            fastcgi_temp_path \(folder)/fastcgi;
            uwsgi_temp_path \(folder)/uwsgi;
            scgi_temp_path \(folder)/scgi;
            ssl_protocols TLSv1.2 TLSv1.3;
            ssl_certificate \(certificate.certificate);
            ssl_certificate_key \(certificate.key);
            root \(root);
            server {
                listen 127.0.0.1:\(ports[0]) ssl;
                # A redirect from https down to plain http, on the port the query names.
                location = /to-http { return 302 http://127.0.0.1:$arg_port/entries/imgly.A.1.json; }
            }
            server {
                listen 127.0.0.1:\(ports[1]) ssl;
                ssl_verify_client on;
                ssl_client_certificate \(clientCA);
            }
            server {
                listen 127.0.0.1:\(ports[2]) ssl http2;
            }
        }

        """
    }

    /// Waits (up to ten seconds) until both ports accept connections while nginx runs.
    private static func waitUntilListening(_ process: ChildProcess, ports: [UInt16]) async -> Bool {
        let limit = ContinuousClock.now.advanced(by: .seconds(10))
        while ContinuousClock.now < limit && process.isRunning {
            if ports.allSatisfy(accepts) {
                return process.isRunning
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    /// SIGKILL: nginx without a master is one process with nothing to hand over or clean up.
    private static func end(_ process: ChildProcess) { process.terminate(grace: .zero) }

    // MARK: - Ports

    /// Whether something accepts a TCP connection on 127.0.0.1:`port`.
    private static func accepts(_ port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = loopback(port: port)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    struct Failed: Error, CustomStringConvertible { var description: String }
}
