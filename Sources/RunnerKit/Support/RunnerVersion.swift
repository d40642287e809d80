/// The runner's version: `runner --version` prints it, and the default User-Agent names it.
package enum RunnerVersion {
    /// The version of this build, `MAJOR.MINOR.PATCH`.
    package static let current = "0.1.0"

    /// The User-Agent both HTTP clients send: `runner/<version>`.
    package static var userAgent: String { "runner/\(current)" }
}
