import RunnerKit

/// `image`: one image. The payload's own bytes decide the format, never the Content-Type.
public struct ImageKind: JobKind {
    public static let name = "image"
    public static let summary = "Fetches one image (PNG, JPEG, GIF, WebP or BMP, told by its bytes) and reports its format and size."
    public static let parameters: [KindParameter] = []
    public static let accept: String? = "image/png,image/jpeg,image/gif,image/webp,image/bmp;q=0.9,*/*;q=0.1"

    public init() {}

    public init(fields: inout JobFields) throws(JobSpecError) {}

    public func run(in context: JobContext) async throws -> KindOutcome {
        guard case .fetched(let response) = try await context.fetch(folder: "images") else {
            return KindOutcome(.notModified, folder: "images", fileExtension: "img")
        }
        let payload = response.payload
        let header: ImageHeader
        do {
            header = try ImageHeader.parse(payload.prefix)
        } catch {
            throw JobFailure.failed("\(error.description) (\(payload.count) bytes, Content-Type \(response.head.headers["content-type"] ?? "none"))", httpStatus: response.head.status)
        }
        guard ImageHeader.isComplete(header.format, prefix: payload.prefix, suffix: payload.suffix, totalLength: payload.count) else {
            throw JobFailure.failed("the \(header.format.rawValue.uppercased()) image is truncated: only \(payload.count) bytes arrived", httpStatus: response.head.status)
        }
        return KindOutcome(
            .body(response), folder: "images", fileExtension: header.format.fileExtension,
            details: [
                ("format", .string(header.format.rawValue)),
                ("width", JSONValue(header.width)),
                ("height", JSONValue(header.height)),
            ])
    }
}
