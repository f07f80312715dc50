// The console is served by the worker: the page at /, its files under /console/assets/.
import { defineConfig } from "vite";

export default defineConfig({
  base: "/console/",
  build: {
    outDir: "../src/sparkfn/worker/console_dist",
    emptyOutDir: true,
    assetsDir: "assets",
    // One script and one stylesheet: a console loads in one round trip each.
    cssCodeSplit: false,
    target: "es2022",
  },
});
