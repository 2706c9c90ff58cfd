//! ACP content blocks ↔ [`ContentPart`]s.

use agent_client_protocol::v1::schema::{
    AudioContent, BlobResourceContents, ContentBlock, EmbeddedResource, EmbeddedResourceResource,
    ImageContent, PromptCapabilities, ResourceLink, TextContent, ToolCallContent,
};

use crate::message::{ContentPart, MediaSource};

/// The parts of a prompt, in order. Nothing is dropped: what has no part of its own (an embedded
/// text resource) becomes text that says what it is.
#[must_use]
pub fn to_parts(blocks: &[ContentBlock]) -> Vec<ContentPart> {
    blocks.iter().map(to_part).collect()
}

/// [`to_parts`], taking the blocks: their text is moved, not copied (a large prompt is held
/// once).
#[must_use]
pub fn into_parts(blocks: Vec<ContentBlock>) -> Vec<ContentPart> {
    blocks
        .into_iter()
        .map(|block| match block {
            ContentBlock::Text(text) => ContentPart::text(text.text),
            other => to_part(&other),
        })
        .collect()
}

/// One block as a part.
#[must_use]
pub fn to_part(block: &ContentBlock) -> ContentPart {
    match block {
        ContentBlock::Text(text) => ContentPart::text(&text.text),
        ContentBlock::Image(image) => ContentPart::Image {
            source: media(&image.data, &image.mime_type, image.uri.as_deref()),
        },
        ContentBlock::Audio(audio) => ContentPart::Audio {
            source: media(&audio.data, &audio.mime_type, None),
        },
        ContentBlock::ResourceLink(link) => ContentPart::Document {
            source: MediaSource::Url {
                url: link.uri.clone(),
                mime_type: link.mime_type.clone(),
            },
        },
        ContentBlock::Resource(embedded) => match &embedded.resource {
            EmbeddedResourceResource::TextResourceContents(text) => ContentPart::text(format!(
                "<resource uri=\"{}\">\n{}\n</resource>",
                text.uri, text.text
            )),
            EmbeddedResourceResource::BlobResourceContents(blob) => {
                let mime_type = blob
                    .mime_type
                    .clone()
                    .unwrap_or_else(|| "application/octet-stream".to_owned());
                let source = MediaSource::Data {
                    data: blob.blob.clone(),
                    mime_type: mime_type.clone(),
                };
                match mime_type.split('/').next() {
                    Some("image") => ContentPart::Image { source },
                    Some("audio") => ContentPart::Audio { source },
                    Some("video") => ContentPart::Video { source },
                    _ => ContentPart::Document { source },
                }
            }
            other => ContentPart::text(format!("[resource: {other:?}]")),
        },
        other => ContentPart::text(format!("[content: {other:?}]")),
    }
}

fn media(data: &str, mime_type: &str, uri: Option<&str>) -> MediaSource {
    match uri {
        Some(uri) if data.is_empty() => MediaSource::Url {
            url: uri.to_owned(),
            mime_type: Some(mime_type.to_owned()),
        },
        _ => MediaSource::Data {
            data: data.to_owned(),
            mime_type: mime_type.to_owned(),
        },
    }
}

/// A part as the block an editor shows: media inline where ACP has a block for it, a resource
/// link for what lives behind a URL, JSON as text.
#[must_use]
pub fn to_block(part: &ContentPart) -> ContentBlock {
    match part {
        ContentPart::Text { text } => ContentBlock::Text(TextContent::new(text.clone())),
        ContentPart::Json { value } => ContentBlock::Text(TextContent::new(value.to_string())),
        ContentPart::Image {
            source: MediaSource::Data { data, mime_type },
        } => ContentBlock::Image(ImageContent::new(data.clone(), mime_type.clone())),
        ContentPart::Audio {
            source: MediaSource::Data { data, mime_type },
        } => ContentBlock::Audio(AudioContent::new(data.clone(), mime_type.clone())),
        ContentPart::Video {
            source: MediaSource::Data { data, mime_type },
        }
        | ContentPart::Document {
            source: MediaSource::Data { data, mime_type },
        } => ContentBlock::Resource(EmbeddedResource::new(
            EmbeddedResourceResource::BlobResourceContents(
                BlobResourceContents::new(data.clone(), "attachment:").mime_type(mime_type.clone()),
            ),
        )),
        ContentPart::Image {
            source: MediaSource::Url { url, mime_type },
        }
        | ContentPart::Audio {
            source: MediaSource::Url { url, mime_type },
        }
        | ContentPart::Video {
            source: MediaSource::Url { url, mime_type },
        }
        | ContentPart::Document {
            source: MediaSource::Url { url, mime_type },
        } => {
            let name = url.rsplit('/').find(|s| !s.is_empty()).unwrap_or(url);
            ContentBlock::ResourceLink(
                ResourceLink::new(name.to_owned(), url.clone()).mime_type(mime_type.clone()),
            )
        }
    }
}

/// Parts as a tool call's content.
pub(crate) fn tool_content(parts: &[ContentPart]) -> Vec<ToolCallContent> {
    parts
        .iter()
        .map(|part| ToolCallContent::from(to_block(part)))
        .collect()
}

/// The prompt capability a block needs, if any: `image`, `audio` or `embeddedContext` (text
/// and resource links need none).
#[must_use]
pub fn needs(block: &ContentBlock) -> Option<&'static str> {
    match block {
        ContentBlock::Image(_) => Some("image"),
        ContentBlock::Audio(_) => Some("audio"),
        ContentBlock::Resource(_) => Some("embeddedContext"),
        _ => None,
    }
}

/// Whether `capabilities` allow `block` in a prompt.
#[must_use]
pub fn allowed(capabilities: &PromptCapabilities, block: &ContentBlock) -> bool {
    match needs(block) {
        Some("image") => capabilities.image,
        Some("audio") => capabilities.audio,
        Some(_) => capabilities.embedded_context,
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_client_protocol::v1::schema::TextResourceContents;

    #[test]
    fn every_prompt_block_reaches_the_model() {
        let blocks = vec![
            ContentBlock::Text(TextContent::new("look")),
            ContentBlock::Image(ImageContent::new("aGk=", "image/png")),
            ContentBlock::Audio(AudioContent::new("aGk=", "audio/wav")),
            ContentBlock::ResourceLink(ResourceLink::new("main.rs", "file:///src/main.rs")),
            ContentBlock::Resource(EmbeddedResource::new(
                EmbeddedResourceResource::TextResourceContents(TextResourceContents::new(
                    "fn main() {}",
                    "file:///src/main.rs",
                )),
            )),
        ];
        let parts = to_parts(&blocks);
        assert_eq!(parts.len(), blocks.len());
        assert!(
            matches!(&parts[1], ContentPart::Image { source: MediaSource::Data { mime_type, .. } } if mime_type == "image/png")
        );
        assert!(matches!(&parts[2], ContentPart::Audio { .. }));
        assert!(
            matches!(&parts[3], ContentPart::Document { source: MediaSource::Url { url, .. } } if url == "file:///src/main.rs")
        );
        assert!(parts[4].to_text().contains("fn main() {}"));
        assert!(parts[4].to_text().contains("file:///src/main.rs"));
    }

    #[test]
    fn parts_come_back_as_the_blocks_they_were() {
        let blocks = vec![
            ContentBlock::Text(TextContent::new("look")),
            ContentBlock::Image(ImageContent::new("aGk=", "image/png")),
            ContentBlock::Audio(AudioContent::new("aGk=", "audio/wav")),
        ];
        let back: Vec<_> = to_parts(&blocks).iter().map(to_block).collect();
        assert_eq!(back, blocks);
        let link = to_block(&to_part(&ContentBlock::ResourceLink(ResourceLink::new(
            "main.rs",
            "file:///src/main.rs",
        ))));
        assert!(matches!(link, ContentBlock::ResourceLink(l) if l.name == "main.rs"));
    }

    #[test]
    fn capabilities_gate_media_and_embedded_context() {
        let none = PromptCapabilities::new();
        assert!(allowed(&none, &ContentBlock::Text(TextContent::new("x"))));
        assert!(allowed(
            &none,
            &ContentBlock::ResourceLink(ResourceLink::new("a", "file:///a"))
        ));
        assert!(!allowed(
            &none,
            &ContentBlock::Image(ImageContent::new("", "image/png"))
        ));
        let images = PromptCapabilities::new().image(true);
        assert!(allowed(
            &images,
            &ContentBlock::Image(ImageContent::new("", "image/png"))
        ));
    }
}
