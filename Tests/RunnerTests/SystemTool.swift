import Foundation
import RunnerTestSupport

/// Runs a tool of the system (a shell, mandoc), which CI installs; a missing one fails the test
/// with what to install.
enum SystemTool {
    struct Output { var status: Int32; var output: String }

    static func run(_ name: String, _ arguments: [String]) async throws -> Output {
        guard let path = ["/usr/bin", "/bin", "/usr/local/bin"].map({ "\($0)/\(name)" }).first(where: FileManager.default.isExecutableFile) else {
            throw Missing(name: name)
        }
        let result = try await ChildProcess.run(path, arguments)
        return Output(status: result.status, output: result.output)
    }

    struct Missing: Error, CustomStringConvertible {
        var name: String
        var description: String { "\(name) is not installed (Debian: apt-get install \(name); .ci/run installs it)" }
    }
}
