// The dashboard is served by ctasd at /ui from files compiled into the
// binary (src/api/ui.rs lists them), so the build writes one script and one
// stylesheet under fixed names.
import { defineConfig } from "vite";

export default defineConfig({
  base: "/ui/",
  esbuild: { jsx: "automatic", jsxImportSource: "preact" },
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    modulePreload: false,
    assetsInlineLimit: 0,
    rollupOptions: {
      output: {
        entryFileNames: "assets/app.js",
        chunkFileNames: "assets/app.js",
        assetFileNames: "assets/app[extname]",
        inlineDynamicImports: true,
      },
    },
  },
});
