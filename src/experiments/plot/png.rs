//! PNG copies of the SVG figures, rendered in process with `resvg` (the
//! plot module's doc says why this and not a plotting crate or a browser).
//!
//! Invariant: a PNG is never written without its labels; with no font to
//! set them in, PNGs are skipped with a message naming what to install.

use std::path::Path;
use std::sync::Arc;

use resvg::{tiny_skia, usvg};

use super::Figure;

/// Families tried, in order, for the figures' generic `sans-serif`: the
/// one the SVG names first, then the usual metric-compatible stand-ins.
const SANS_FAMILIES: [&str; 6] = [
    "DejaVu Sans",
    "Liberation Sans",
    "Noto Sans",
    "FreeSans",
    "Arial",
    "Helvetica",
];

/// Turns the SVG figures into PNG images in process. Loads the system's
/// fonts once (a few ms with a handful of font files).
pub struct Rasterizer {
    options: usvg::Options<'static>,
}

impl Rasterizer {
    /// Loads the system fonts (fontconfig's directories and the usual
    /// ones); an error, naming what to install, when there is none to set
    /// the labels in.
    pub fn new() -> Result<Rasterizer, String> {
        let mut db = usvg::fontdb::Database::new();
        db.load_system_fonts();
        Self::with_fonts(db)
    }

    /// As [`Rasterizer::new`] with a font database of the caller's.
    pub fn with_fonts(mut db: usvg::fontdb::Database) -> Result<Rasterizer, String> {
        let has_family = |db: &usvg::fontdb::Database, family: &str| {
            db.faces()
                .any(|f| f.families.iter().any(|(name, _)| name == family))
        };
        let sans = SANS_FAMILIES
            .iter()
            .find(|f| has_family(&db, f))
            .map(|f| f.to_string())
            .or_else(|| {
                db.faces()
                    .find_map(|f| f.families.first().map(|(name, _)| name.clone()))
            })
            .ok_or(
                "no font found to set the figures' labels in (searched fontconfig's and the usual font directories); install one, e.g. `apt-get install fonts-dejavu-core` on Debian/Ubuntu, or use --no-png",
            )?;
        db.set_sans_serif_family(sans.clone());
        let options = usvg::Options {
            font_family: sans,
            fontdb: Arc::new(db),
            ..usvg::Options::default()
        };
        Ok(Rasterizer { options })
    }

    /// The family the labels are set in.
    pub fn font_family(&self) -> &str {
        &self.options.font_family
    }

    /// The PNG of `svg` at its declared size (1 SVG px = 1 pixel).
    pub fn png(&self, svg: &str) -> Result<Vec<u8>, String> {
        let tree = usvg::Tree::from_str(svg, &self.options).map_err(|e| e.to_string())?;
        let size = tree.size().to_int_size();
        let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height())
            .ok_or_else(|| format!("cannot draw {}x{} pixels", size.width(), size.height()))?;
        resvg::render(
            &tree,
            tiny_skia::Transform::identity(),
            &mut pixmap.as_mut(),
        );
        pixmap.encode_png().map_err(|e| e.to_string())
    }
}

/// Writes each figure's SVG, and its PNG when `png`; returns a line per
/// file written (or skipped). Without a font the PNGs are skipped with a
/// line saying so: the SVGs are complete, and a PNG without its labels
/// would mislead.
pub fn write_figures(figures: &[Figure], out: &Path, png: bool) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    let rasterizer = if png {
        match Rasterizer::new() {
            Ok(r) => Some(r),
            Err(e) => {
                lines.push(format!("PNG skipped: {e}; the SVGs are complete"));
                None
            }
        }
    } else {
        None
    };
    for figure in figures {
        let path = out.join(format!("{}.svg", figure.name));
        std::fs::write(&path, &figure.svg)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        lines.push(format!("wrote {}", path.display()));
        if let Some(rasterizer) = &rasterizer {
            let png_path = out.join(format!("{}.png", figure.name));
            let bytes = rasterizer
                .png(&figure.svg)
                .map_err(|e| format!("cannot render {}: {e}", figure.name))?;
            std::fs::write(&png_path, bytes)
                .map_err(|e| format!("cannot write {}: {e}", png_path.display()))?;
            lines.push(format!("wrote {}", png_path.display()));
        }
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_font_pngs_are_refused_naming_the_package() {
        let error = Rasterizer::with_fonts(usvg::fontdb::Database::new())
            .err()
            .expect("no fonts: no rasterizer");
        assert!(error.contains("fonts-dejavu-core"), "{error}");
    }
}
