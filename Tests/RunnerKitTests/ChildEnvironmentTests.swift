import RunnerKit
import Testing

/// What hooks and executable kinds get of the runner's environment.
struct ChildEnvironmentTests {
    @Test func secretsAndTheirCopiesAreWithheldAndShortOnesOnlyWhole() {
        ChildEnvironment.withhold("a-long-page-token-0123456789")
        ChildEnvironment.withhold("pw1")
        let made = ChildEnvironment.make(
            adding: ["RUNNER_KEY": "k"],
            from: [
                "PGPASSWORD": "s3cret-pass", "PGPASSFILE": "/etc/runner/pgpass", "RUNNER_QUEUE": "postgresql://runner@db/jobs",
                "COPY": "x s3cret-pass y", "URL_COPY": "postgresql://runner@db/jobs", "TOKEN_COPY": "Bearer a-long-page-token-0123456789",
                "WEAK": "pw1", "PATH": "/usr/bin:/home/pw1/bin", "HOME": "/home/pw1",
            ])
        #expect(made == ["RUNNER_KEY": "k", "PATH": "/usr/bin:/home/pw1/bin", "HOME": "/home/pw1"], "\(made)")
    }
}
